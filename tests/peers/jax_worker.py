"""A JAX training job that serves the profiler, for mlprof's capture tests.

Starts `jax.profiler.start_server(PORT)` (PORT 0: the script picks a free one), compiles
a small MLP's SGD step, prints exactly one line `listening on 127.0.0.1:PORT` once the
step is compiled and a few steps have run, then keeps training, each step wrapped in
`jax.profiler.StepTraceAnnotation("train", step_num=i)`, for SECONDS seconds. With
SLOW_AFTER, each step sleeps 20 ms more once that many seconds have passed: a job that
slows down, for the agent's capture on a slowdown.

Usage: python jax_worker.py [PORT] [SECONDS] [SLOW_AFTER]
"""
import socket
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 0
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
SLOW_AFTER = float(sys.argv[3]) if len(sys.argv) > 3 else None
BATCH, DIN, DH, DOUT = 64, 784, 256, 10


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def init(key):
  k1, k2, k3 = jax.random.split(key, 3)
  return {
      "w1": jax.random.normal(k1, (DIN, DH)) * 0.05, "b1": jnp.zeros(DH),
      "w2": jax.random.normal(k2, (DH, DH)) * 0.05, "b2": jnp.zeros(DH),
      "w3": jax.random.normal(k3, (DH, DOUT)) * 0.05, "b3": jnp.zeros(DOUT),
  }


def loss_fn(p, x, y):
  h = jax.nn.relu(x @ p["w1"] + p["b1"])
  h = jax.nn.relu(h @ p["w2"] + p["b2"])
  logp = jax.nn.log_softmax(h @ p["w3"] + p["b3"])
  return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


@jax.jit
def train_step(p, x, y):
  loss, g = jax.value_and_grad(loss_fn)(p, x, y)
  return jax.tree_util.tree_map(lambda a, b: a - 0.05 * b, p, g), loss


def main():
  port = PORT or free_port()
  jax.profiler.start_server(port)
  rng = np.random.default_rng(0)
  params = init(jax.random.PRNGKey(0))
  started = time.time()
  deadline = started + SECONDS
  step = 0
  while time.time() < deadline:
    x = rng.standard_normal((BATCH, DIN)).astype(np.float32)
    y = rng.integers(0, DOUT, size=BATCH)
    with jax.profiler.StepTraceAnnotation("train", step_num=step):
      params, loss = train_step(params, jnp.asarray(x), jnp.asarray(y))
      loss.block_until_ready()
      if SLOW_AFTER is not None and time.time() - started > SLOW_AFTER:
        time.sleep(0.02)
    step += 1
    if step == 3:
      print(f"listening on 127.0.0.1:{port}", flush=True)
    time.sleep(0.002)  # a little host-side work between steps
  print(f"done after {step} steps, loss {float(loss):.4f}", flush=True)


if __name__ == "__main__":
  main()

"""A small JAX training job (MLP classifier + optax AdamW) for GPU fixtures.

Batches come from numpy on the host each step (device_put: real H2D copies).
  --trace LOGDIR   jax.profiler.trace around --steps steps, each in a
                   StepTraceAnnotation("train", step_num=i)
  (no --trace)     no profiler code at all; --seconds S runs that long
--report FILE writes step times as JSON; --stamps FILE every step's [unix end time s,
length s].
"""
import argparse
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax


def init(key, sizes):
    params = []
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        k = jax.random.fold_in(key, i)
        params.append((jax.random.normal(k, (m, n), jnp.float32) / np.sqrt(m), jnp.zeros((n,))))
    return params


def forward(params, x):
    for w, b in params[:-1]:
        x = jax.nn.gelu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--trace")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seconds", type=float)
    p.add_argument("--report")
    p.add_argument("--stamps")
    a = p.parse_args()
    sizes = [1024, 4096, 4096, 4096, 1000]
    params = init(jax.random.PRNGKey(0), sizes)
    tx = optax.adamw(1e-3)
    opt_state = tx.init(params)

    def loss_fn(params, x, y):
        logits = forward(params, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @jax.jit
    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    rng = np.random.default_rng(0)

    def batch():
        x = rng.standard_normal((512, 1024), dtype=np.float32)
        y = rng.integers(0, 1000, (512,), dtype=np.int32)
        return jax.device_put(x), jax.device_put(y)

    for _ in range(3):
        x, y = batch()
        params, opt_state, loss = train_step(params, opt_state, x, y)
    loss.block_until_ready()
    times = []
    stamps = []

    def run(n):
        nonlocal params, opt_state
        t_start = time.perf_counter()
        i = 0
        while (time.perf_counter() - t_start < a.seconds) if a.seconds else i < n:
            t0 = time.perf_counter()
            if a.trace:
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    x, y = batch()
                    params, opt_state, loss = train_step(params, opt_state, x, y)
                    loss.block_until_ready()
            else:
                x, y = batch()
                params, opt_state, loss = train_step(params, opt_state, x, y)
                loss.block_until_ready()
            times.append(time.perf_counter() - t0)
            stamps.append((time.time(), times[-1]))
            i += 1

    if a.trace:
        with jax.profiler.trace(a.trace):
            run(a.steps)
    else:
        run(a.steps)
    if a.stamps:
        json.dump(stamps, open(a.stamps, "w"))
    times.sort()
    n = len(times)
    rep = {"mode": "trace" if a.trace else "plain", "jax": jax.__version__,
           "devices": [str(d) for d in jax.devices()], "steps": n,
           "median_ms": 1000 * times[n // 2], "mean_ms": 1000 * sum(times) / n}
    print("REPORT", json.dumps(rep), flush=True)
    if a.report:
        json.dump(rep, open(a.report, "w"))


if __name__ == "__main__":
    sys.exit(main())

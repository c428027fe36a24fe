"""A plain JAX training loop with no profiler code, for `mlprof run` tests.

Linear regression by jitted gradient steps on host batches, for SECONDS (argv[1], default
15) of wall time; prints `steps N` at the end.
"""
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def train_step(w, x, y):
    loss = lambda w: jnp.mean((x @ w - y) ** 2)
    return w - 0.01 * jax.grad(loss)(w)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 15.0
    rng = np.random.default_rng(0)
    w = jnp.zeros((128, 1))
    steps, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        x = rng.standard_normal((256, 128), dtype=np.float32)
        y = rng.standard_normal((256, 1), dtype=np.float32)
        w = train_step(w, x, y).block_until_ready()
        steps += 1
    print("steps", steps, flush=True)


if __name__ == "__main__":
    main()

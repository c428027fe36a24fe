"""A JAX job whose steps run many kinds of XLA op, for XLA's GPU cost model (issue 26).

One jitted training step of a small conv + embedding + MLP model with a hand-written
loss, plus an update that gathers, scatters, slices, dynamically slices and updates,
concatenates, pads, reverses, sorts and takes cumulative sums, and uses exp, log,
log1p, tanh, logistic, erf, rsqrt, sqrt, power, atan2, remainder, clamp and select. Run
with XLA_FLAGS=--xla_gpu_enable_command_buffer= so that each fusion is its own kernel
launch (XProf then reads one kernel per HLO op).
  --trace LOGDIR   jax.profiler.trace around --steps steps, each in a
                   StepTraceAnnotation("train", step_num=i)
  --mixed          the model computes in bfloat16, and each step adds an int8 and an
                   fp8 (e4m3) matrix product (8-bit inputs: XProf halves device FLOPs)
Prints one REPORT line of JSON.
"""
import argparse
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

VOCAB, EMB, IMG, CH, HID, CLASSES, BATCH = 4096, 128, 32, 16, 512, 100, 256


def init(key):
    k = [jax.random.fold_in(key, i) for i in range(5)]
    return {
        "emb": jax.random.normal(k[0], (VOCAB, EMB)) * 0.02,
        "conv": jax.random.normal(k[1], (3, 3, 3, CH)) * 0.1,
        "w1": jax.random.normal(k[2], (CH * (IMG // 2) * (IMG // 2) // 4 + EMB, HID)) * 0.01,
        "w2": jax.random.normal(k[3], (HID, CLASSES)) * 0.02,
        "b2": jnp.zeros((CLASSES,)),
    }


MIXED = False


def forward(p, img, ids, start):
    if MIXED:
        p = jax.tree.map(lambda a: a.astype(jnp.bfloat16), p)
        img = img.astype(jnp.bfloat16)
    y = jax.lax.conv_general_dilated(img, p["conv"], (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jax.nn.gelu(y)
    y = jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = y[:, ::2, ::2, :].reshape(img.shape[0], -1)                       # strided slice
    e = jnp.take(p["emb"], ids, axis=0).mean(axis=1)                      # gather + reduce
    e = jax.lax.dynamic_slice(jnp.pad(e, ((0, 0), (4, 4))), (0, start), (e.shape[0], EMB))
    h = jnp.concatenate([y, e], axis=1) @ p["w1"]
    h = jnp.tanh(h) * jax.nn.sigmoid(h) + jax.scipy.special.erf(h) * 0.1
    h = h * jax.lax.rsqrt(jnp.mean(h * h, axis=1, keepdims=True) + 1e-5)
    return (h @ p["w2"] + p["b2"]).astype(jnp.float32)


def loss_fn(p, img, ids, labels, start):
    logits = forward(p, img, ids, start)
    logz = jnp.log(jnp.sum(jnp.exp(logits - logits.max(axis=1, keepdims=True)), axis=1)) + logits.max(axis=1)
    picked = jnp.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
    return jnp.mean(logz - picked)


@jax.jit
def train_step(p, m, img, ids, labels, start, step):
    loss, g = jax.value_and_grad(loss_fn)(p, img, ids, labels, start)
    m = jax.tree.map(lambda a, b: 0.9 * a + 0.1 * b * b, m, g)
    lr = 1e-3 * jnp.power(0.99, step.astype(jnp.float32))
    p = jax.tree.map(lambda w, gr, v: w - lr * gr / (jnp.sqrt(v) + 1e-8), p, g, m)
    # Ops a real step has around the model: row updates, sorting, scans, rotations.
    counts = jnp.zeros((VOCAB,)).at[ids.reshape(-1)].add(1.0)              # scatter
    order = jnp.argsort(-counts)[:64]                                      # sort + slice
    top = jax.lax.dynamic_update_slice(p["emb"], p["emb"][order][:8] * 0.999, (start, 0))
    p = dict(p, emb=jnp.where(jnp.isfinite(top), top, 0.0))               # select
    extra = []
    if MIXED:
        # Quantized products on the current weights: int8 x int8 -> int32, fp8 x fp8 -> f32.
        w = p["w1"][:512]
        scale = 127.0 / (jnp.max(jnp.abs(w)) + 1e-6)
        w8 = jnp.round(w * scale).astype(jnp.int8)
        a8 = jnp.round(jnp.tanh(w.T) * 127.0).astype(jnp.int8)
        extra.append(jnp.sum(jax.lax.dot(a8, w8, preferred_element_type=jnp.int32)).astype(jnp.float32))
        f8 = jnp.float8_e4m3fn
        extra.append(jnp.sum(jnp.dot(w.T.astype(f8), w.astype(f8), preferred_element_type=jnp.float32)))
    stats = jnp.stack(extra + [
        jnp.cumsum(counts)[-1],
        jnp.sum(jnp.log1p(counts)),
        jnp.sum(jnp.arctan2(counts, 1.0 + counts)),
        jnp.sum(jnp.remainder(counts, 7.0)),
        jnp.sum(jnp.clip(jnp.flip(counts), 0.0, 3.0)),
    ])
    return p, m, loss, stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--mixed", action="store_true")
    a = ap.parse_args()
    global MIXED
    MIXED = a.mixed
    p = init(jax.random.PRNGKey(0))
    m = jax.tree.map(jnp.zeros_like, p)
    rng = np.random.default_rng(0)

    def batch():
        img = rng.standard_normal((BATCH, IMG, IMG, 3), dtype=np.float32)
        ids = rng.integers(0, VOCAB, (BATCH, 16), dtype=np.int32)
        labels = rng.integers(0, CLASSES, (BATCH,), dtype=np.int32)
        return jax.device_put(img), jax.device_put(ids), jax.device_put(labels)

    for i in range(2):
        p, m, loss, stats = train_step(p, m, *batch(), np.int32(i % 8), np.int32(i))
    loss.block_until_ready()
    times = []

    def run():
        nonlocal p, m
        for i in range(a.steps):
            t0 = time.perf_counter()
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                p, m, loss, stats = train_step(p, m, *batch(), np.int32(i % 8), np.int32(i))
                loss.block_until_ready()
            times.append(time.perf_counter() - t0)
        return float(loss), [float(s) for s in stats]

    if a.trace:
        with jax.profiler.trace(a.trace):
            loss, stats = run()
    else:
        loss, stats = run()
    times.sort()
    rep = {"jax": jax.__version__, "devices": [str(d) for d in jax.devices()], "steps": len(times),
           "median_ms": 1000 * times[len(times) // 2], "loss": loss, "stats": stats}
    print("REPORT", json.dumps(rep), flush=True)


if __name__ == "__main__":
    sys.exit(main())

"""A TensorFlow training job that serves the profiler, for mlprof's capture tests.

Starts `tf.profiler.experimental.server.start(PORT)` (PORT 0: the script picks a free
one), traces a small `tf.function` training step, prints exactly one line
`listening on 127.0.0.1:PORT` once a few steps have run, then keeps training, each step
wrapped in `tf.profiler.experimental.Trace("train", step_num=i, _r=1)`, for SECONDS
seconds.

Usage: python tf_worker.py [PORT] [SECONDS]
"""
import os
import socket
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # pylint: disable=g-import-not-at-top

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 0
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


w = tf.Variable(tf.random.normal((256, 256), seed=1))


@tf.function
def train_step(x):
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.matmul(x, w) ** 2)
  w.assign_sub(1e-3 * tape.gradient(loss, w))
  return loss


def main():
  port = PORT or free_port()
  tf.profiler.experimental.server.start(port)
  deadline = time.time() + SECONDS
  step = 0
  while time.time() < deadline:
    with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
      loss = train_step(tf.random.normal((64, 256)))
      float(loss)
    step += 1
    if step == 3:
      print(f"listening on 127.0.0.1:{port}", flush=True)
  print(f"done after {step} steps", flush=True)


if __name__ == "__main__":
  main()

"""TensorFlow's own capture client, for mlprof's server tests.

Runs `tf.profiler.experimental.client.trace('grpc://ADDR', LOGDIR, duration_ms=MS)`,
the call behind TensorBoard's Capture Profile in TensorFlow.

Usage: python tf_client.py ADDR LOGDIR [MS]
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # pylint: disable=g-import-not-at-top

duration_ms = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
tf.profiler.experimental.client.trace("grpc://" + sys.argv[1], sys.argv[2], duration_ms=duration_ms)

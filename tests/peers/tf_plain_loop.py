"""A plain TensorFlow training loop with no profiler code, for `mlprof run` tests.

A small Keras model trained by a tf.function step on random batches, for SECONDS (argv[1],
default 20) of wall time; prints `steps N` at the end.
"""
import sys
import time

import tensorflow as tf


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    model = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(128, activation="relu"), tf.keras.layers.Dense(10)])
    optimizer = tf.keras.optimizers.SGD(0.01)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    steps, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        x = tf.random.normal((64, 64))
        y = tf.random.uniform((64,), maxval=10, dtype=tf.int32)
        train_step(x, y)
        steps += 1
    print("steps", steps, flush=True)


if __name__ == "__main__":
    main()

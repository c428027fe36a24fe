//! What to change in a tf.data pipeline, by the kind of its bottleneck iterator (the
//! TF guide's input-pipeline best practices: parallel map and interleave with
//! AUTOTUNE, cache, shard early, avoid `from_generator` and `py_function`, prefetch,
//! tf.data's own threads), in plain text with the code to write.

use crate::tf_data::BottleneckKind;

const CACHE: &str = "If the data fits in memory and nothing random (shuffle, augmentation) comes before \
     the expensive step, add `.cache()` right after it so later epochs skip it.";

/// Fixes for a pipeline whose bottleneck iterator is `iterator` (the last `::` segment,
/// `MapAndBatch`), most effective first.
pub fn for_iterator(iterator: &str) -> Vec<String> {
    let named = |text: &str| text.replace("{it}", iterator);
    if iterator.contains("Map") && !iterator.contains("FlatMap") {
        return vec![
            named(
                "`{it}` spends the time in your map function: run it on several cores with \
                 `dataset.map(f, num_parallel_calls=tf.data.AUTOTUNE)` (tf.data fuses map and batch into \
                 MapAndBatch and keeps that parallelism).",
            ),
            "Vectorise the map function: batch first and map over whole batches (`dataset.batch(n).map(f, \
             num_parallel_calls=tf.data.AUTOTUNE)`), so f runs once per batch instead of once per element."
                .to_string(),
            CACHE.to_string(),
        ];
    }
    if iterator.contains("Interleave") || iterator.contains("FlatMap") {
        return vec![
            named(
                "`{it}` reads or expands its inputs one at a time: use `interleave(..., cycle_length=N, \
                 num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)` to work on several at once.",
            ),
            CACHE.to_string(),
        ];
    }
    if iterator == "Prefetch" {
        return vec![
            "The step waits on the prefetch buffer: the transformations before `prefetch` produce elements more \
             slowly than the step consumes them. Parallelise them (`num_parallel_calls=tf.data.AUTOTUNE` on map \
             and interleave), cache, or move preprocessing offline."
                .to_string(),
        ];
    }
    if iterator == "Generator" {
        return vec![
            "`from_generator` runs your Python generator one element at a time under the GIL: write the data to \
             TFRecord files (or use `from_tensor_slices` on arrays) and read them with a parallel interleave, or \
             split the generator into shards read through `interleave`."
                .to_string(),
        ];
    }
    match BottleneckKind::of(iterator) {
        BottleneckKind::SlowSource => vec![
            named(
                "`{it}` reads one file at a time: read several in parallel with \
                 `tf.data.Dataset.list_files(...).interleave(tf.data.TFRecordDataset, \
                 num_parallel_calls=tf.data.AUTOTUNE)`, and keep the data close to the host.",
            ),
            SHARD_EARLY.to_string(),
            CACHE.to_string(),
        ],
        BottleneckKind::SlowTransformationWithoutParallelVersion => vec![
            named(
                "`{it}` is sequential: vectorise the work around it (batch before map), use \
                 `batch(..., num_parallel_calls=tf.data.AUTOTUNE)` for batching, or run several shards of the \
                 pipeline and combine them with `interleave`.",
            ),
            CACHE.to_string(),
        ],
        BottleneckKind::SlowDataService | BottleneckKind::SlowRemoteSource => vec![named(
            "`{it}` waits for a remote source: profile the tf.data service workers or the source's host, and \
             prefetch more (`.prefetch(tf.data.AUTOTUNE)`) to hide its latency.",
        )],
        _ => vec![named(
            "`{it}` is the slowest stage: parallelise the transformations before it \
             (`num_parallel_calls=tf.data.AUTOTUNE`), cache, or move preprocessing offline.",
        )],
    }
}

/// Sharding before reading, for jobs with several workers.
pub const SHARD_EARLY: &str = "With several workers, shard early: `.shard(num_workers, worker_index)` on the file \
     list, before reading, so each worker reads only its files.";

/// The fix when the pipeline has no `Prefetch` stage.
pub const ADD_PREFETCH: &str = "End the pipeline with `.prefetch(tf.data.AUTOTUNE)` so the next batch is prepared \
     while the current step runs.";

/// The fix when `tf.py_function` / `tf.numpy_function` ops run (`EagerPyFunc`, `PyFunc`).
pub const AVOID_PY_FUNCTION: &str = "Replace `tf.py_function` / `tf.numpy_function` in the pipeline with TensorFlow \
     ops (tf.image, tf.io, tf.strings): Python holds the GIL, so parallel map calls of a py_function still run \
     one at a time.";

/// Giving tf.data its own threads (the guide's intra-op parallelism advice).
pub const OWN_THREADS: &str = "Give tf.data its own threads so it does not compete with the training step: \
     `options = tf.data.Options(); options.threading.private_threadpool_size = N; \
     options.threading.max_intra_op_parallelism = 1; dataset = dataset.with_options(options)`.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_iterator_gets_its_own_fix() {
        assert!(for_iterator("MapAndBatch")[0].contains("`MapAndBatch`"));
        assert!(for_iterator("MapAndBatch")[0].contains("num_parallel_calls=tf.data.AUTOTUNE"));
        assert!(for_iterator("ParallelInterleaveV4")[0].contains("cycle_length"));
        assert!(for_iterator("Prefetch")[0].contains("prefetch buffer"));
        assert!(for_iterator("Generator")[0].contains("from_generator"));
        assert!(for_iterator("TFRecord").iter().any(|f| f.contains("shard early")));
        assert!(for_iterator("Batch")[0].contains("sequential"));
        assert!(for_iterator("Unknown")[0].contains("slowest stage"));
    }
}

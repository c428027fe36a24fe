//! How far loading has come, for a progress display: the bytes of input the readers have
//! to decode and have decoded so far. Readers run in parallel (one per host file), so the
//! counts are atomics that the display polls; nothing here prints.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of input to decode and decoded, across every file of a load.
#[derive(Debug, Default)]
pub struct LoadProgress {
    /// Bytes of input (after inflating) of the files opened so far.
    to_read: AtomicU64,
    /// Bytes of that input the readers have finished with.
    read: AtomicU64,
}

impl LoadProgress {
    /// A file of `bytes` bytes (inflated) is about to be decoded.
    pub fn add_input(&self, bytes: u64) {
        self.to_read.fetch_add(bytes, Ordering::Relaxed);
    }

    /// `bytes` more bytes of input are decoded.
    pub fn advance(&self, bytes: u64) {
        self.read.fetch_add(bytes, Ordering::Relaxed);
    }

    /// `(decoded, to decode)` so far, in bytes; decoded never exceeds the total.
    pub fn snapshot(&self) -> (u64, u64) {
        let total = self.to_read.load(Ordering::Relaxed);
        (self.read.load(Ordering::Relaxed).min(total), total)
    }
}

/// Counts one file's decoded bytes into a [`LoadProgress`], so that whatever the reader
/// reported, the file counts exactly its size once it is done.
pub(crate) struct FileProgress<'p> {
    progress: Option<&'p LoadProgress>,
    size: u64,
    reported: AtomicU64,
}

impl<'p> FileProgress<'p> {
    /// Starts counting a file of `size` bytes.
    pub(crate) fn start(progress: Option<&'p LoadProgress>, size: u64) -> FileProgress<'p> {
        if let Some(progress) = progress {
            progress.add_input(size);
        }
        FileProgress { progress, size, reported: AtomicU64::new(0) }
    }

    /// The reader has finished with `bytes` more bytes of the file.
    pub(crate) fn advance(&self, bytes: u64) {
        if let Some(progress) = self.progress {
            let before = self.reported.fetch_add(bytes, Ordering::Relaxed);
            progress.advance(bytes.min(self.size.saturating_sub(before)));
        }
    }

    /// The file is decoded (or failed): the rest of its bytes count as done.
    pub(crate) fn finish(&self) {
        let reported = self.reported.load(Ordering::Relaxed);
        self.advance(self.size.saturating_sub(reported));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_counts_its_size_once_whatever_the_reader_reports() {
        let progress = LoadProgress::default();
        let file = FileProgress::start(Some(&progress), 100);
        assert_eq!(progress.snapshot(), (0, 100));
        file.advance(30);
        file.advance(90);
        assert_eq!(progress.snapshot(), (100, 100), "capped at the file's size");
        file.finish();
        assert_eq!(progress.snapshot(), (100, 100));
        let other = FileProgress::start(Some(&progress), 50);
        other.finish();
        assert_eq!(progress.snapshot(), (150, 150));
        FileProgress::start(None, 10).finish();
    }
}

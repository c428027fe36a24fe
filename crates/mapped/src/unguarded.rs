//! Where there is no `SIGBUS` to guard against (not unix), the file is read into memory
//! once, and [`GuardedMap`] offers the same interface over that buffer.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;

use crate::Change;

/// Never: reading is all this fallback does.
pub(crate) fn must_read_instead(_error: &io::Error) -> bool {
    false
}

/// A file's bytes, read when "mapped".
#[derive(Debug)]
pub struct GuardedMap {
    bytes: Vec<u8>,
}

impl GuardedMap {
    /// Reads the whole of `file`.
    pub fn map(mut file: File) -> io::Result<GuardedMap> {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(GuardedMap { bytes })
    }

    /// Never changed: the bytes were copied.
    pub fn changed(&self) -> Option<Change> {
        None
    }

    /// Nothing to release in an owned buffer.
    pub fn release(&self, _offset: usize, _len: usize) {}
}

impl Deref for GuardedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

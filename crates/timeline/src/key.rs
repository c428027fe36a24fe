//! Which source an index file belongs to: a [`CacheKey`] names the profile file
//! (canonical path, size, modification time) and a caller-chosen `variant` (what the
//! caller added to the index, e.g. its derived tracks, and its version), so an index
//! built from an older state of the file, or by an older recipe, is refused as
//! [`crate::CacheError::Stale`] and rebuilt. The key is stored in the index file.

use std::path::Path;
use std::time::UNIX_EPOCH;

use crate::checksum::checksum;
use crate::column::{Col, Le};
use crate::error::CacheError;

/// What an index was built from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheKey {
    /// The profile file's path: canonical (symbolic links and `..` resolved) when made by
    /// [`CacheKey::for_file`], so two names of one file share one index.
    pub source_path: String,
    /// Its size in bytes.
    pub source_bytes: u64,
    /// Its modification time, nanoseconds since the Unix epoch (0 when unknown).
    pub source_modified_ns: i64,
    /// The caller's recipe: what it added on top of the file's events, and its version.
    pub variant: String,
}

impl CacheKey {
    /// The key of the file at `path` as it is now on disk, under its canonical path.
    pub fn for_file(path: &Path, variant: &str) -> Result<CacheKey, CacheError> {
        let io = |source| CacheError::Io { path: path.to_path_buf(), source };
        let canonical = std::fs::canonicalize(path).map_err(io)?;
        let meta = std::fs::metadata(&canonical).map_err(io)?;
        let modified_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_nanos()).ok())
            .unwrap_or(0);
        Ok(CacheKey {
            source_path: canonical.display().to_string(),
            source_bytes: meta.len(),
            source_modified_ns: modified_ns,
            variant: variant.to_string(),
        })
    }

    /// A file name for this key's index: `stem` made safe for a file name, then a hash
    /// of the source path and variant (`train_vm-3f2a…​.mltl`). The size and time are
    /// not part of the name, so a rebuilt index replaces the stale one.
    pub fn file_name(&self, stem: &str) -> String {
        let safe: String = stem
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' })
            .take(64)
            .collect();
        let mut identity = self.source_path.clone().into_bytes();
        identity.push(0);
        identity.extend_from_slice(self.variant.as_bytes());
        format!("{safe}-{:016x}.mltl", checksum(&identity))
    }

    /// One line for messages.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} ({} bytes, modified at {} ns, variant {:?})",
            self.source_path, self.source_bytes, self.source_modified_ns, self.variant
        )
    }

    /// The key part of the file.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.source_bytes.encode(&mut out);
        self.source_modified_ns.encode(&mut out);
        (self.source_path.len() as u64).encode(&mut out);
        (self.variant.len() as u64).encode(&mut out);
        out.extend_from_slice(self.source_path.as_bytes());
        out.extend_from_slice(self.variant.as_bytes());
        out
    }

    /// Reads the key part; `None` when it is inconsistent.
    pub(crate) fn decode(bytes: &[u8]) -> Option<CacheKey> {
        let fixed = Col::<u64>::new(bytes.get(..32)?);
        let path_len = usize::try_from(fixed.get(2)?).ok()?;
        let variant_len = usize::try_from(fixed.get(3)?).ok()?;
        let path_end = 32usize.checked_add(path_len)?;
        let variant_end = path_end.checked_add(variant_len)?;
        if variant_end != bytes.len() {
            return None;
        }
        Some(CacheKey {
            source_bytes: fixed.get(0)?,
            source_modified_ns: fixed.get(1)? as i64,
            source_path: std::str::from_utf8(&bytes[32..path_end]).ok()?.to_string(),
            variant: std::str::from_utf8(&bytes[path_end..variant_end]).ok()?.to_string(),
        })
    }
}

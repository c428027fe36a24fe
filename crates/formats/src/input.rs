//! Getting a profile file's bytes into memory: memory-mapped when stored plain,
//! inflated into one buffer when gzipped (detected by the gzip magic, not the name).
//!
//! Decoders work on a `&[u8]` of the whole file; that is what lets the XSpace decoder
//! be zero-copy and the JSON reader borrow strings instead of allocating them.

use std::fs::File;
use std::io::Read;
use std::ops::{Deref, Range};
use std::path::Path;

use flate2::bufread::MultiGzDecoder;

use crate::error::{FormatError, Result};

/// The first two bytes of every gzip member.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The bytes of a profile file.
pub enum FileBytes {
    /// A plain file, memory-mapped.
    Mapped(memmap2::Mmap),
    /// A decompressed (or small, read) file.
    Owned(Vec<u8>),
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m,
            FileBytes::Owned(v) => v,
        }
    }
}

/// Granularity of [`FileBytes::release`]: ranges are shrunk to whole multiples of this
/// (a multiple of every common page size) at their end.
const RELEASE_ALIGN_BYTES: usize = 64 << 10;

impl FileBytes {
    /// Tells the operating system that the bytes in `range` (offsets into the file)
    /// will not be read again soon, so the memory holding them can be dropped now: a
    /// reader calls this with the part of the file it has parsed, which keeps a large
    /// mapped file from counting in full towards the process's resident memory. Does
    /// nothing for an owned buffer. `range` is widened down to a multiple of 64 KiB at
    /// its start and narrowed down to one at its end (except at the end of the file).
    ///
    /// Reading those bytes again is still correct, only slower: see the safety note.
    pub fn release(&self, range: Range<usize>) {
        let FileBytes::Mapped(map) = self else {
            return;
        };
        let start = range.start - range.start % RELEASE_ALIGN_BYTES;
        let end = if range.end >= map.len() { map.len() } else { range.end - range.end % RELEASE_ALIGN_BYTES };
        if start >= end {
            return;
        }
        // SAFETY: `map` is a read-only (PROT_READ) mapping of a file, never written
        // through. MADV_DONTNEED only removes its pages from this process's page
        // tables; the next access to them faults the same bytes back in from the page
        // cache or the file. So every `&[u8]` into the map (including the strings the
        // readers borrow from it) keeps seeing the same content, as Rust requires,
        // under the assumption `load_file` already makes that no other process
        // modifies the file meanwhile. The range lies inside the map (checked above).
        // The advice is only a hint: an error leaves the pages resident, which is fine.
        #[cfg(unix)]
        let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start) };
        #[cfg(not(unix))]
        let _ = (map, start, end);
    }
}

/// A profile file in memory, with its on-disk size.
pub struct LoadedFile {
    /// Decompressed content.
    pub bytes: FileBytes,
    /// Size on disk in bytes.
    pub stored_bytes: u64,
    /// True when the file was gzip-compressed.
    pub gzipped: bool,
}

/// Reads `path` fully: maps plain files, inflates gzip (multi-member) ones.
pub fn load_file(path: &Path) -> Result<LoadedFile> {
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|e| FormatError::io(&shown, e))?;
    let stored_bytes = file.metadata().map_err(|e| FormatError::io(&shown, e))?.len();
    if stored_bytes == 0 {
        return Err(FormatError::unrecognized(&shown, "file is empty (0 bytes)"));
    }
    // SAFETY: the map is read-only; a profile changed by another process while we read
    // it can yield garbage, which the decoders reject like any other corrupt input.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| FormatError::io(&shown, e))?;
    if map.starts_with(&GZIP_MAGIC) {
        let bytes = gunzip(&map, &shown)?;
        if bytes.is_empty() {
            return Err(FormatError::unrecognized(&shown, "gzip data decompresses to 0 bytes"));
        }
        return Ok(LoadedFile { bytes: FileBytes::Owned(bytes), stored_bytes, gzipped: true });
    }
    Ok(LoadedFile { bytes: FileBytes::Mapped(map), stored_bytes, gzipped: false })
}

/// Inflates a complete (possibly multi-member) gzip stream.
pub fn gunzip(compressed: &[u8], shown_path: &str) -> Result<Vec<u8>> {
    let mut reader = CountingSlice { data: compressed, pos: 0 };
    let mut out = Vec::with_capacity(compressed.len().saturating_mul(4).min(1 << 30));
    let result = MultiGzDecoder::new(&mut reader).read_to_end(&mut out);
    match result {
        Ok(_) => Ok(out),
        Err(e) => Err(FormatError::Gzip {
            path: shown_path.to_string(),
            offset: reader.pos as u64,
            message: if e.kind() == std::io::ErrorKind::UnexpectedEof {
                "the stream ends before its end marker (truncated file?)".to_string()
            } else {
                e.to_string()
            },
        }),
    }
}

/// Inflates at most `limit` bytes of the start of a gzip stream (for sniffing); a
/// corrupt or short stream just yields what could be inflated.
pub fn gunzip_prefix(compressed: &[u8], limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut decoder = MultiGzDecoder::new(compressed).take(limit as u64);
    let _ = decoder.read_to_end(&mut out);
    out
}

/// A `BufRead` over a slice that remembers how far the decoder consumed it.
struct CountingSlice<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Read for CountingSlice<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let rest = &self.data[self.pos..];
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }
}

impl std::io::BufRead for CountingSlice<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        Ok(&self.data[self.pos..])
    }
    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.data.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn gunzip_reads_concatenated_members() {
        let mut both = gzip(b"hello ");
        both.extend(gzip(b"world"));
        assert_eq!(gunzip(&both, "x").unwrap(), b"hello world");
    }

    #[test]
    fn truncated_gzip_names_the_offset() {
        let data = gzip(&vec![7u8; 100_000]);
        let cut = &data[..data.len() - 10];
        let err = gunzip(cut, "t.json.gz").unwrap_err().to_string();
        assert!(err.starts_with("t.json.gz: corrupt or truncated gzip data at compressed byte offset"), "{err}");
    }
}

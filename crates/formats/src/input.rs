//! Getting a profile file's bytes into memory: memory-mapped when stored plain,
//! inflated into one buffer when gzipped (detected by the gzip magic, not the name).
//!
//! Decoders work on a `&[u8]` of the whole file; that is what lets the XSpace decoder
//! be zero-copy and the JSON reader borrow strings instead of allocating them. The map
//! is a [`GuardedMap`]: a file truncated while it is read (training still writing its
//! log directory) gives zeros instead of a `SIGBUS`, so whoever decodes the bytes calls
//! [`LoadedFile::unchanged`] afterwards and reports the change rather than what it made
//! of the zeros. Only regular files are opened, without blocking (a FIFO named like a
//! trace is refused, not waited on), and a gzip file is inflated only up to a limit
//! ([`LoadOptions::inflate_limit_bytes`]), so a small "gzip bomb" cannot exhaust memory.

use std::fs::File;
use std::io::Read;
use std::ops::{Deref, Range};
use std::path::{Path, PathBuf};

use flate2::bufread::MultiGzDecoder;
use mlprof_mapped::{Contents, GuardedMap};

use crate::error::{FormatError, Result};

/// The first two bytes of every gzip member.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The largest protobuf message (2 GiB), hence the largest valid XSpace: protobuf's
/// own parsers refuse anything longer.
pub const XSPACE_LIMIT_BYTES: u64 = 2 << 30;

/// The bytes of a profile file.
pub enum FileBytes {
    /// A plain file, memory-mapped.
    Mapped(GuardedMap),
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

/// A callback told about byte ranges of the input that a reader has finished with
/// (see [`FileBytes::release`]). Called from the reading threads; it must leave the
/// bytes readable (a hint, not an unmap).
pub(crate) type Release<'a> = &'a (dyn Fn(Range<usize>) + Sync);

/// How many bytes a reader reads between two calls of its [`Release`] callback (4 MiB).
pub(crate) const RELEASE_STEP_BYTES: usize = 4 << 20;

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
    /// Reading those bytes again is still correct, only slower.
    pub fn release(&self, range: Range<usize>) {
        let FileBytes::Mapped(map) = self else {
            return;
        };
        let start = range.start - range.start % RELEASE_ALIGN_BYTES;
        let end = if range.end >= map.len() { map.len() } else { range.end - range.end % RELEASE_ALIGN_BYTES };
        if start < end {
            map.release(start, end - start);
        }
    }
}

/// How many times its compressed size a gzip profile may inflate to (above
/// [`RATIO_FLOOR_BYTES`]): real traces compress 10–25×, deflate's ceiling is about
/// 1,000× — reached by the zeros or blanks of a "gzip bomb".
pub const MAX_INFLATE_RATIO: u64 = 200;

/// Up to this size a gzip profile may inflate whatever its ratio (64 MiB).
pub const RATIO_FLOOR_BYTES: u64 = 64 << 20;

/// How a profile file is opened and inflated.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// The most bytes a gzip file may inflate to, whatever its size; see
    /// [`LoadOptions::for_format`]. Inflating also stops at [`MAX_INFLATE_RATIO`] times
    /// the compressed size.
    pub inflate_limit_bytes: u64,
    /// When set, the file must lie inside this directory (a canonical path), checked
    /// on the opened file itself, so a link swapped in after discovery is refused.
    pub within: Option<PathBuf>,
    /// When set, the readers count the bytes they decode into it (for a progress bar).
    pub progress: Option<std::sync::Arc<crate::progress::LoadProgress>>,
    /// Whether a memory snapshot's trace entries also become events (the default), or
    /// stay in [`mlprof_model::Host::allocator_trace`] alone.
    pub snapshot_entries: crate::torch_memory::EntryEvents,
}

impl Default for LoadOptions {
    /// Inflating up to a third of the memory available now (a JSON trace's model needs
    /// about as much again, or more), and no confinement.
    fn default() -> LoadOptions {
        LoadOptions {
            inflate_limit_bytes: memory_inflate_limit_bytes(),
            within: None,
            progress: None,
            snapshot_entries: crate::torch_memory::EntryEvents::Made,
        }
    }
}

impl LoadOptions {
    /// The default options for a file of `format`: an XSpace may not inflate past
    /// [`XSPACE_LIMIT_BYTES`], whatever the memory.
    pub fn for_format(format: mlprof_model::SourceFormat) -> LoadOptions {
        LoadOptions::default().for_file_of(format)
    }

    /// These options for a file of `format` (an XSpace's limit, as
    /// [`LoadOptions::for_format`]).
    pub fn for_file_of(&self, format: mlprof_model::SourceFormat) -> LoadOptions {
        let mut options = self.clone();
        if format == mlprof_model::SourceFormat::Xspace {
            options.inflate_limit_bytes = options.inflate_limit_bytes.min(XSPACE_LIMIT_BYTES);
        }
        options
    }
}

/// A third of `MemAvailable` (from `/proc/meminfo`), at least 1 GiB; 8 GiB where that
/// is not known.
fn memory_inflate_limit_bytes() -> u64 {
    const FLOOR_BYTES: u64 = 1 << 30;
    const UNKNOWN_BYTES: u64 = 8 << 30;
    let available_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        text.lines()
            .find_map(|line| line.strip_prefix("MemAvailable:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    available_kib.map_or(UNKNOWN_BYTES, |kib| (kib.saturating_mul(1024) / 3).max(FLOOR_BYTES))
}

/// A profile file in memory, with its on-disk size.
pub struct LoadedFile {
    /// Decompressed content.
    pub bytes: FileBytes,
    /// Size on disk in bytes.
    pub stored_bytes: u64,
    /// True when the file was gzip-compressed.
    pub gzipped: bool,
    /// The file as named, for errors.
    shown: String,
}

impl LoadedFile {
    /// Ok when the file still holds what was read from it; call after decoding
    /// [`LoadedFile::bytes`], and prefer this error to the decoder's: a file truncated
    /// while mapped reads as zeros, which decode to nonsense or to a misleading error.
    pub fn unchanged(&self) -> Result<()> {
        match &self.bytes {
            FileBytes::Mapped(map) => match map.changed() {
                Some(change) => Err(FormatError::Changed { path: self.shown.clone(), change }),
                None => Ok(()),
            },
            FileBytes::Owned(_) => Ok(()),
        }
    }
}

/// Reads `path` fully with [`LoadOptions::default`]: maps plain files, inflates gzip
/// (multi-member) ones.
pub fn load_file(path: &Path) -> Result<LoadedFile> {
    load_file_with(path, &LoadOptions::default())
}

/// Reads `path` fully: maps plain files, inflates gzip (multi-member) ones up to
/// `options.inflate_limit_bytes`; refuses anything but a regular file, and a file
/// outside `options.within`.
pub fn load_file_with(path: &Path, options: &LoadOptions) -> Result<LoadedFile> {
    let shown = path.display().to_string();
    let file = open_regular(path)?;
    if let Some(root) = &options.within {
        check_within(&file, path, root)?;
    }
    let stored_bytes = file.metadata().map_err(|e| FormatError::io(&shown, e))?.len();
    if stored_bytes == 0 {
        return Err(FormatError::unrecognized(&shown, "file is empty (0 bytes)"));
    }
    let map = map_file(file, &shown)?;
    let loaded = LoadedFile { bytes: map, stored_bytes, gzipped: false, shown };
    if !loaded.bytes.starts_with(&GZIP_MAGIC) {
        return Ok(loaded);
    }
    let by_ratio = (stored_bytes.saturating_mul(MAX_INFLATE_RATIO)).max(RATIO_FLOOR_BYTES);
    let limit = if by_ratio < options.inflate_limit_bytes {
        InflateLimit::Ratio(by_ratio)
    } else if options.inflate_limit_bytes == XSPACE_LIMIT_BYTES {
        InflateLimit::Protobuf
    } else {
        InflateLimit::Memory(options.inflate_limit_bytes)
    };
    let inflated = inflate_within(&loaded.bytes, &loaded.shown, limit);
    loaded.unchanged()?;
    let bytes = inflated?;
    if bytes.is_empty() {
        return Err(FormatError::unrecognized(&loaded.shown, "gzip data decompresses to 0 bytes"));
    }
    Ok(LoadedFile { bytes: FileBytes::Owned(bytes), gzipped: true, ..loaded })
}

/// Opens `path` for reading if it is a regular file, without blocking on a FIFO or a
/// device (`O_NONBLOCK`, then the opened file's type is checked).
pub fn open_regular(path: &Path) -> Result<File> {
    let shown = path.display().to_string();
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).map_err(|e| FormatError::io(&shown, e))?;
    let kind = file.metadata().map_err(|e| FormatError::io(&shown, e))?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    Err(FormatError::unrecognized(shown, format!("not a regular file ({})", describe_file_type(kind))))
}

/// What kind of file system object a non-regular file is, in words.
pub fn describe_file_type(kind: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a named pipe";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() { "a directory" } else { "not a file" }
}

/// Refuses `file` (opened from `path`) unless the file actually opened lies inside
/// the canonical directory `root`: on Linux by the opened descriptor's own path, so a
/// link or directory swapped in between discovery and opening is caught.
fn check_within(file: &File, path: &Path, root: &Path) -> Result<()> {
    #[cfg(target_os = "linux")]
    let opened = {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).or_else(|_| path.canonicalize())
    };
    #[cfg(not(target_os = "linux"))]
    let opened = {
        let _ = file;
        path.canonicalize()
    };
    let shown = path.display().to_string();
    let opened = opened.map_err(|e| FormatError::io(&shown, e))?;
    if opened.starts_with(root) {
        return Ok(());
    }
    Err(FormatError::unrecognized(
        shown,
        format!("refused: it now leads to {}, outside {}", opened.display(), root.display()),
    ))
}

/// Maps `file`; reads it into memory instead when it cannot be guarded (too many maps
/// live, or no `SIGBUS` handler).
fn map_file(file: File, shown: &str) -> Result<FileBytes> {
    match mlprof_mapped::map_or_read(file).map_err(|e| FormatError::io(shown, e))? {
        Contents::Mapped(map) => Ok(FileBytes::Mapped(map)),
        Contents::Read(bytes) => Ok(FileBytes::Owned(bytes)),
    }
}

/// Inflates a complete (possibly multi-member) gzip stream, however large.
pub fn gunzip(compressed: &[u8], shown_path: &str) -> Result<Vec<u8>> {
    inflate_within(compressed, shown_path, InflateLimit::Memory(u64::MAX))
}

/// How far a gzip stream may inflate, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InflateLimit {
    /// [`MAX_INFLATE_RATIO`] times the compressed size (bytes).
    Ratio(u64),
    /// [`XSPACE_LIMIT_BYTES`]: no XSpace is larger.
    Protobuf,
    /// A share of the memory available (bytes).
    Memory(u64),
}

impl InflateLimit {
    /// The limit in bytes.
    pub fn bytes(self) -> u64 {
        match self {
            InflateLimit::Ratio(bytes) | InflateLimit::Memory(bytes) => bytes,
            InflateLimit::Protobuf => XSPACE_LIMIT_BYTES,
        }
    }
}

/// Inflates a complete (possibly multi-member) gzip stream of at most `limit` bytes.
pub fn inflate_within(compressed: &[u8], shown_path: &str, limit: InflateLimit) -> Result<Vec<u8>> {
    let limit_bytes = limit.bytes();
    let mut reader = CountingSlice { data: compressed, pos: 0 };
    let initial =
        compressed.len().saturating_mul(4).min(1 << 30).min(usize::try_from(limit_bytes).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(initial);
    let result = MultiGzDecoder::new(&mut reader).take(limit_bytes.saturating_add(1)).read_to_end(&mut out);
    match result {
        Ok(_) if out.len() as u64 > limit_bytes => {
            Err(FormatError::TooLarge { path: shown_path.to_string(), message: too_large_message(limit) })
        }
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

/// Why inflating stopped at `limit`.
fn too_large_message(limit: InflateLimit) -> String {
    let shown = |bytes: u64| mlprof_model::human::bytes(bytes as f64);
    let advice = "decompress it to disk first (gunzip -k) so that it can be mapped instead of held in memory";
    match limit {
        InflateLimit::Ratio(bytes) => format!(
            "the gzip data inflates to more than {} ({MAX_INFLATE_RATIO}x its compressed size; profiles compress \
             10-25x): refused as a likely gzip bomb; if it is a real profile, {advice}",
            shown(bytes)
        ),
        InflateLimit::Protobuf => {
            "the gzip data inflates to more than 2 GiB, the protobuf message limit: no valid XSpace is that large"
                .to_string()
        }
        InflateLimit::Memory(bytes) => format!(
            "the gzip data inflates to more than {}, a third of the memory available now: {advice}",
            shown(bytes)
        ),
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
    fn inflating_stops_at_the_limit_and_says_why() {
        let bomb = gzip(&vec![0u8; 1 << 20]);
        let err = inflate_within(&bomb, "z.json.gz", InflateLimit::Memory(1000)).unwrap_err().to_string();
        assert!(
            err.starts_with("z.json.gz: the gzip data inflates to more than 0.98 KiB, a third of the memory"),
            "{err}"
        );
        assert_eq!(inflate_within(&bomb, "z", InflateLimit::Memory(1 << 20)).unwrap().len(), 1 << 20);
        let err = inflate_within(&bomb, "r.json.gz", InflateLimit::Ratio(4 << 10)).unwrap_err().to_string();
        assert!(err.contains("(200x its compressed size; profiles compress 10-25x): refused as a likely gzip bomb"));
        assert_eq!(inflate_within(&gzip(b"xy"), "s.xplane.pb.gz", InflateLimit::Protobuf).unwrap().len(), 2);
        assert!(too_large_message(InflateLimit::Protobuf).contains("2 GiB, the protobuf message limit"));
    }

    #[test]
    fn a_gzip_bomb_is_refused_at_200_times_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let bomb = dir.path().join("bomb.json.gz");
        // 80 MiB of blanks inflate from about 80 KB: past the 64 MiB floor.
        std::fs::write(&bomb, gzip(&vec![b' '; 80 << 20])).unwrap();
        let err = load_file(&bomb).err().expect("refused").to_string();
        assert!(err.contains("bomb.json.gz: the gzip data inflates to more than 64 MiB (200x"), "{err}");
    }

    #[test]
    fn an_xspace_may_not_inflate_past_the_protobuf_limit() {
        let options = LoadOptions::for_format(mlprof_model::SourceFormat::Xspace);
        assert!(options.inflate_limit_bytes <= XSPACE_LIMIT_BYTES);
    }

    #[cfg(unix)]
    #[test]
    fn a_named_pipe_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("trace.json");
        let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string and mode.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        let err = load_file(&fifo).err().expect("refused").to_string();
        assert!(err.ends_with("trace.json: not a regular file (a named pipe)"), "{err}");
        let err = load_file(Path::new("/dev/zero")).err().expect("refused").to_string();
        assert_eq!(err, "/dev/zero: not a regular file (a character device)");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_swapped_for_a_link_out_of_the_root_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let inside = root.path().join("rank0.json");
        std::fs::write(&inside, b"{}").unwrap();
        std::fs::write(outside.path().join("secret.json"), b"{}").unwrap();
        let options = LoadOptions { within: Some(root.path().canonicalize().unwrap()), ..LoadOptions::default() };
        assert!(load_file_with(&inside, &options).is_ok());
        std::fs::remove_file(&inside).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.json"), &inside).unwrap();
        let err = load_file_with(&inside, &options).err().expect("refused").to_string();
        assert!(err.contains("refused: it now leads to") && err.contains("secret.json, outside"), "{err}");
    }

    #[test]
    fn truncated_gzip_names_the_offset() {
        let data = gzip(&vec![7u8; 100_000]);
        let cut = &data[..data.len() - 10];
        let err = gunzip(cut, "t.json.gz").unwrap_err().to_string();
        assert!(err.starts_with("t.json.gz: corrupt or truncated gzip data at compressed byte offset"), "{err}");
    }
}

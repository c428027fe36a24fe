//! The on-disk cache: writing an index file (keyed by a [`CacheKey`]) so that a reader
//! never sees half of one — files are written to a temporary file in the same directory
//! and renamed when complete.

use std::io::BufWriter;
use std::path::Path;

use crate::builder::BuiltIndex;
use crate::error::CacheError;
use crate::format::write_index;
use crate::key::CacheKey;

impl BuiltIndex {
    /// Writes the index to `path` atomically (a temporary file beside it, renamed when
    /// complete), creating the directory if needed.
    pub fn write(&self, path: &Path, key: &CacheKey) -> Result<(), CacheError> {
        let io = |source| CacheError::Io { path: path.to_path_buf(), source };
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let mut tmp = tempfile::Builder::new().prefix(".mltl-partial-").tempfile_in(&dir).map_err(io)?;
        write_index(self, key, BufWriter::with_capacity(1 << 20, tmp.as_file_mut())).map_err(io)?;
        tmp.persist(path).map_err(|e| io(e.error))?;
        Ok(())
    }

    /// The index file's bytes, in memory.
    pub fn to_bytes(&self, key: &CacheKey) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        // Writing to memory cannot fail.
        let _ = write_index(self, key, &mut out);
        out.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::TimelineBuilder;
    use crate::index::TimelineIndex;
    use crate::synthetic::Synthetic;

    fn built() -> BuiltIndex {
        let mut b = TimelineBuilder::new();
        Synthetic { names: 50, streams: 1, threads: 2, ..Synthetic::realistic(3_000, 3) }
            .add_to(&mut b)
            .expect("generate");
        b.finish().expect("finish")
    }

    fn key(variant: &str) -> CacheKey {
        CacheKey {
            source_path: "/p/vm.xplane.pb".into(),
            source_bytes: 123,
            source_modified_ns: 456,
            variant: variant.into(),
        }
    }

    #[test]
    fn written_files_reopen_identically_and_other_keys_are_stale() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub").join(key("v1").file_name("train/vm"));
        let index = built();
        index.write(&path, &key("v1")).expect("write");
        let listing: Vec<_> = std::fs::read_dir(path.parent().expect("dir")).expect("ls").collect();
        assert_eq!(listing.len(), 1, "no temporary file left behind");
        let opened = TimelineIndex::open(&path, &key("v1")).expect("open");
        let in_memory = index.clone().into_index().expect("in memory");
        assert_eq!(opened.key(), &key("v1"));
        assert_eq!(opened.event_count(), in_memory.event_count());
        for id in (0..opened.event_count() as u32).step_by(97) {
            assert_eq!(opened.event(id), in_memory.event(id));
        }
        assert_eq!(opened.search("relu", 10), in_memory.search("relu", 10));
        for other in
            [key("v2"), CacheKey { source_bytes: 124, ..key("v1") }, CacheKey { source_modified_ns: 0, ..key("v1") }]
        {
            assert!(matches!(TimelineIndex::open(&path, &other), Err(CacheError::Stale { .. })));
        }
        assert!(matches!(TimelineIndex::open(&dir.path().join("none"), &key("v1")), Err(CacheError::Io { .. })));
    }

    #[test]
    fn truncated_or_damaged_files_are_refused_without_panicking() {
        let bytes = built().to_bytes(&key("v1"));
        assert!(TimelineIndex::from_bytes(bytes.clone()).is_ok());
        for len in (0..bytes.len()).step_by(61).chain([bytes.len() - 1, 63, 64, 65]) {
            let result = TimelineIndex::from_bytes(bytes[..len].to_vec());
            assert!(
                matches!(result, Err(CacheError::Truncated { .. } | CacheError::NotAnIndex { .. })),
                "prefix of {len} bytes: {result:?}"
            );
        }
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0; 8]);
        assert!(matches!(TimelineIndex::from_bytes(longer), Err(CacheError::Truncated { .. })));
        for at in (0..bytes.len()).step_by(bytes.len() / 400 + 1).chain(0..80) {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert!(TimelineIndex::from_bytes(damaged).is_err(), "flipped byte {at} went unnoticed");
        }
        let mut other_version = bytes.clone();
        other_version[8] = 99;
        assert!(matches!(TimelineIndex::from_bytes(other_version), Err(CacheError::Version { found: 99, .. })));
        assert!(matches!(
            TimelineIndex::from_bytes(b"not an index at all".to_vec()),
            Err(CacheError::NotAnIndex { .. })
        ));
    }

    #[cfg(unix)]
    #[test]
    fn an_open_index_truncated_under_it_reads_zeros_and_says_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(key("v1").file_name("run-host"));
        let index = Synthetic { names: 50, streams: 1, threads: 2, ..Synthetic::realistic(200_000, 3) };
        let mut builder = TimelineBuilder::new();
        index.add_to(&mut builder).expect("generate");
        builder.finish().expect("finish").write(&path, &key("v1")).expect("write");
        let opened = TimelineIndex::open(&path, &key("v1")).expect("open");
        assert_eq!(opened.changed(), None);
        std::fs::OpenOptions::new().write(true).open(&path).and_then(|f| f.set_len(4096)).expect("truncated");
        // Every event and a whole-span view: reads past the new end used to be SIGBUS.
        for id in 0..opened.event_count() as u32 {
            let _ = opened.event(id);
        }
        let (start_ps, end_ps) = opened.span_ps();
        let _ = opened.view(&crate::Viewport { start_ps, end_ps, width_px: 2000, tracks: None });
        assert_eq!(opened.changed(), Some(mlprof_mapped::Change::Truncated));
        assert!(matches!(TimelineIndex::open(&path, &key("v1")), Err(CacheError::Truncated { .. })));
    }

    #[test]
    fn keys_of_one_file_under_other_names_are_equal_and_canonical() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        let file = real.join("trace.json");
        std::fs::write(&file, b"{}").expect("written");
        std::os::unix::fs::symlink(&real, dir.path().join("link")).expect("symlink");
        let direct = CacheKey::for_file(&file, "v").expect("key");
        let canonical = std::fs::canonicalize(&file).expect("canonical");
        assert_eq!(direct.source_path, canonical.display().to_string());
        for other in [dir.path().join("link/trace.json"), real.join("../real/./trace.json")] {
            let key = CacheKey::for_file(&other, "v").expect("key");
            assert_eq!(key, direct, "{}", other.display());
            assert_eq!(key.file_name("h"), direct.file_name("h"));
        }
    }

    #[test]
    fn keys_survive_the_file_and_name_files_safely() {
        let k = CacheKey { source_path: "/d/ünïcode path".into(), ..key("serve-1 steps") };
        assert_eq!(CacheKey::decode(&k.encode()), Some(k.clone()));
        assert_eq!(CacheKey::decode(&k.encode()[..40]), None);
        let name = k.file_name("run/2026_01_01/host:1");
        assert!(name.starts_with("run_2026_01_01_host_1-") && name.ends_with(".mltl"), "{name}");
        assert_ne!(name, key("other").file_name("run/2026_01_01/host:1"));
    }
}

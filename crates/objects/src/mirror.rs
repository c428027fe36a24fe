//! A store's profiles, copied into a local cache that `mlprof serve` serves like any log
//! directory, and kept in step with the store by calling [`Mirror::sync`] again.
//!
//! The cache of one URL is `<cache>/objects/<hash>/`: `profiles/` (what is served, in
//! TensorBoard's layout), `manifest.json` (each session's files as the store listed them:
//! size and ETag) and `staging/`. A session is fetched when its listing differs from the
//! manifest: its files are downloaded into `staging/`, each checked against the size
//! listed, and the session directory is renamed into place whole, so a reader sees the
//! old session or the new one, never a mix. A session gone from the store goes from the
//! cache (only after a complete listing: a level that could not be listed removes
//! nothing). One process mirrors a URL at a time (a lock file); a session that fails is
//! left as it was and named in [`Synced::skipped`], and the others go on.
//!
//! Keys that could name something outside the cache are never written ([`crate::layout`]).
//! The store's listing is read in one pass; a key the client cannot even parse makes that
//! pass fail, so the listing is then walked one level at a time, and only the level
//! holding the key is left out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use futures_util::StreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectMeta, ObjectStoreExt};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

use crate::layout::{MAX_RUN_DEPTH, NotProfile, profile_key};
use crate::store::{ObjectsError, Store};

/// The most objects a listing may hold (each costs about 200 bytes in memory).
pub const MAX_OBJECTS: usize = 2_000_000;
/// Space kept free on the cache's file system, bytes: a session that would leave less is
/// not fetched.
pub const FREE_SPACE_KEPT_BYTES: u64 = 1 << 30;

/// One file of a session as the store listed it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Listed {
    file: String,
    size: u64,
    e_tag: Option<String>,
}

/// Every session mirrored: its parts joined by `/`, and its files.
#[derive(Default, Serialize, Deserialize)]
struct Manifest {
    sessions: BTreeMap<String, Vec<Listed>>,
}

/// What one [`Mirror::sync`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Synced {
    /// Sessions in the cache now.
    pub sessions: usize,
    /// Sessions fetched (new or changed).
    pub fetched: usize,
    /// Their bytes.
    pub fetched_bytes: u64,
    /// Sessions removed (gone from the store).
    pub removed: usize,
    /// What was left out, a line each: keys that could lead outside the cache, levels
    /// that could not be listed, sessions that could not be fetched.
    pub skipped: Vec<String>,
}

/// A store mirrored into a local cache.
pub struct Mirror {
    store: Store,
    root: PathBuf,
    manifest: Manifest,
    /// Held while this mirror lives: one process mirrors a URL at a time.
    _lock: std::fs::File,
}

impl Mirror {
    /// The mirror of `store` under `cache` (created if need be), with what an earlier run
    /// left there. Fails when another process mirrors the same URL into it.
    pub fn open(store: Store, cache: &Path) -> Result<Mirror, ObjectsError> {
        let url = store.url().to_string();
        let root = cache.join("objects").join(format!("{:016x}", fnv1a(url.as_bytes())));
        std::fs::create_dir_all(root.join("profiles")).map_err(|e| ObjectsError::local(&root, e))?;
        let lock_path = root.join("lock");
        let lock = std::fs::File::create(&lock_path).map_err(|e| ObjectsError::local(&lock_path, e))?;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(ObjectsError::local(&root, format!("another mlprof process mirrors {url} here")));
        }
        let staging = root.join("staging");
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(|e| ObjectsError::local(&staging, e))?;
        }
        let manifest_path = root.join("manifest.json");
        let manifest = match std::fs::read(&manifest_path) {
            // An unreadable manifest only costs a fetch of every session again.
            Ok(text) => serde_json::from_slice(&text).unwrap_or_default(),
            Err(_) => Manifest::default(),
        };
        Ok(Mirror { store, root, manifest, _lock: lock })
    }

    /// The log directory served: the store's sessions in TensorBoard's layout.
    pub fn profiles(&self) -> PathBuf {
        self.root.join("profiles")
    }

    /// Brings the cache in step with the store. Fails only when nothing of the store could
    /// be listed (unreachable, refused, no such bucket) or the cache cannot be written.
    pub async fn sync(&mut self) -> Result<Synced, ObjectsError> {
        let mut synced = Synced::default();
        let mut unlisted = Vec::new();
        let objects = self.list(&mut synced.skipped, &mut unlisted).await?;
        let mut sessions: BTreeMap<Vec<String>, Vec<(Listed, Key)>> = BTreeMap::new();
        let prefix = self.store.key([]);
        for meta in objects {
            let Some(parts) = meta.location.prefix_match(&prefix) else { continue };
            let parts: Vec<String> = parts.map(|part| part.as_ref().to_string()).collect();
            let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
            match profile_key(&parts) {
                Ok(key) => {
                    let file = Listed { file: key.file.clone(), size: meta.size, e_tag: meta.e_tag.clone() };
                    sessions.entry(key.session).or_default().push((file, meta.location.clone()));
                }
                Err(NotProfile::Unsafe) => synced
                    .skipped
                    .push(format!("{}: a key that is not a plain path", self.store.url_of(&meta.location))),
                Err(NotProfile::Elsewhere) => {}
            }
        }
        let listed: std::collections::BTreeSet<String> = sessions.keys().map(|session| session.join("/")).collect();
        for (session, mut files) in sessions {
            files.sort();
            let name = session.join("/");
            let wanted: Vec<Listed> = files.iter().map(|(listed, _)| listed.clone()).collect();
            let dir = session.iter().fold(self.profiles(), |dir, part| dir.join(part));
            if self.manifest.sessions.get(&name) == Some(&wanted) && dir.is_dir() {
                continue;
            }
            match self.fetch(&dir, &files).await {
                Ok(bytes) => {
                    synced.fetched += 1;
                    synced.fetched_bytes += bytes;
                    self.manifest.sessions.insert(name, wanted);
                }
                Err(error) => synced.skipped.push(error.to_string()),
            }
        }
        // A session under a level that could not be listed is not known to be gone.
        let unknown = |name: &str| {
            let parts: Vec<&str> = name.split('/').collect();
            unlisted.iter().any(|level| parts.starts_with(&level.iter().map(String::as_str).collect::<Vec<_>>()))
        };
        let gone: Vec<String> =
            self.manifest.sessions.keys().filter(|name| !listed.contains(*name) && !unknown(name)).cloned().collect();
        for name in gone {
            let dir = name.split('/').fold(self.profiles(), |dir, part| dir.join(part));
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => synced.removed += 1,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => synced.skipped.push(ObjectsError::local(&dir, error).to_string()),
            }
            self.manifest.sessions.remove(&name);
        }
        synced.sessions = self.manifest.sessions.len();
        self.save_manifest()?;
        Ok(synced)
    }

    /// Every object under the prefix: in one pass, or level by level when a key breaks it
    /// (the levels that could not be listed go to `unlisted`, as parts under the prefix).
    async fn list(
        &self,
        skipped: &mut Vec<String>,
        unlisted: &mut Vec<Vec<String>>,
    ) -> Result<Vec<ObjectMeta>, ObjectsError> {
        let prefix = self.store.key([]);
        let mut objects = Vec::new();
        let mut stream = self.store.inner().list(Some(&prefix));
        let mut failed = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok(meta) => objects.push(meta),
                Err(error) => {
                    failed = Some(error);
                    break;
                }
            }
            if objects.len() > MAX_OBJECTS {
                return Err(self.too_many());
            }
        }
        match failed {
            None => Ok(objects),
            Some(error) if objects.is_empty() && !is_parse_error(&error) => {
                Err(ObjectsError::store(self.store.url(), "list", &error))
            }
            Some(_) => self.walk(skipped, unlisted).await,
        }
    }

    /// Every object under the prefix, one directory level per request; a level that cannot
    /// be listed is named in `skipped` and `unlisted`, and the rest go on.
    async fn walk(
        &self,
        skipped: &mut Vec<String>,
        unlisted: &mut Vec<Vec<String>>,
    ) -> Result<Vec<ObjectMeta>, ObjectsError> {
        let mut objects = Vec::new();
        let prefix = self.store.key([]);
        let mut levels = vec![(prefix.clone(), 0)];
        let mut first = true;
        while let Some((level, depth)) = levels.pop() {
            match self.store.inner().list_with_delimiter(Some(&level)).await {
                Ok(listed) => {
                    objects.extend(listed.objects);
                    if depth < MAX_RUN_DEPTH + 3 {
                        levels.extend(listed.common_prefixes.into_iter().map(|p| (p, depth + 1)));
                    }
                }
                Err(error) if first && !is_parse_error(&error) => {
                    return Err(ObjectsError::store(self.store.url(), "list", &error));
                }
                Err(error) => {
                    skipped.push(ObjectsError::store(&self.store.url_of(&level), "list", &error).to_string());
                    let parts =
                        level.prefix_match(&prefix).map(|parts| parts.map(|p| p.as_ref().to_string()).collect());
                    unlisted.push(parts.unwrap_or_default());
                }
            }
            first = false;
            if objects.len() > MAX_OBJECTS {
                return Err(self.too_many());
            }
        }
        Ok(objects)
    }

    /// The error of a listing past [`MAX_OBJECTS`].
    fn too_many(&self) -> ObjectsError {
        let why = format!("more than {MAX_OBJECTS} objects: name a narrower prefix");
        ObjectsError::Store { url: self.store.url().to_string(), what: "list", why }
    }

    /// Downloads one session's `files` and puts them at `dir` at once; bytes fetched.
    async fn fetch(&self, dir: &Path, files: &[(Listed, Key)]) -> Result<u64, ObjectsError> {
        let needed = files.iter().map(|(listed, _)| listed.size).sum::<u64>();
        let free = free_bytes(&self.root).map_err(|e| ObjectsError::local(&self.root, e))?;
        if free < needed.saturating_add(FREE_SPACE_KEPT_BYTES) {
            let why = format!("{needed} bytes would leave less than 1 GiB free ({free} bytes free)");
            return Err(ObjectsError::local(dir, why));
        }
        let staging = self.root.join("staging");
        let staged = staging.join("new");
        let _ = std::fs::remove_dir_all(&staged);
        std::fs::create_dir_all(&staged).map_err(|e| ObjectsError::local(&staged, e))?;
        let mut bytes = 0;
        for (listed, key) in files {
            match self.download(key, listed.size, &staged.join(&listed.file)).await {
                Ok(got) => bytes += got,
                Err(error) => {
                    let _ = std::fs::remove_dir_all(&staged);
                    return Err(error);
                }
            }
        }
        let parent = dir.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(parent).map_err(|e| ObjectsError::local(parent, e))?;
        let old = staging.join("old");
        let _ = std::fs::remove_dir_all(&old);
        if dir.exists() {
            std::fs::rename(dir, &old).map_err(|e| ObjectsError::local(dir, e))?;
        }
        std::fs::rename(&staged, dir).map_err(|e| ObjectsError::local(dir, e))?;
        let _ = std::fs::remove_dir_all(&old);
        Ok(bytes)
    }

    /// Downloads `key` into `path`, checking it holds the `size` bytes listed.
    async fn download(&self, key: &Key, size: u64, path: &Path) -> Result<u64, ObjectsError> {
        let url = self.store.url_of(key);
        let got = self.store.inner().get(key).await.map_err(|e| ObjectsError::store(&url, "download", &e))?;
        let mut stream = got.into_stream();
        let mut file = tokio::fs::File::create(path).await.map_err(|e| ObjectsError::local(path, e))?;
        let mut written = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| ObjectsError::store(&url, "download", &e))?;
            written += chunk.len() as u64;
            if written > size {
                let why = format!("more than the {size} bytes listed: it changed while it was read");
                return Err(ObjectsError::Store { url: url.to_string(), what: "download", why });
            }
            file.write_all(&chunk).await.map_err(|e| ObjectsError::local(path, e))?;
        }
        if written != size {
            let why = format!("{written} of the {size} bytes listed: it changed while it was read");
            return Err(ObjectsError::Store { url: url.to_string(), what: "download", why });
        }
        file.flush().await.map_err(|e| ObjectsError::local(path, e))?;
        Ok(written)
    }

    /// Writes the manifest (a whole new file renamed over the old one).
    fn save_manifest(&self) -> Result<(), ObjectsError> {
        let path = self.root.join("manifest.json");
        let temporary = self.root.join("manifest.json.new");
        let text = serde_json::to_vec(&self.manifest).map_err(|e| ObjectsError::local(&path, e))?;
        std::fs::write(&temporary, text).map_err(|e| ObjectsError::local(&temporary, e))?;
        std::fs::rename(&temporary, &path).map_err(|e| ObjectsError::local(&path, e))
    }
}

/// Whether the client failed on a key it could not parse (a listing holding such a key).
fn is_parse_error(error: &object_store::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(cause) = source {
        if cause.downcast_ref::<object_store::path::Error>().is_some() {
            return true;
        }
        source = cause.source();
    }
    false
}

/// The bytes free to an unprivileged user on the file system holding `path`.
fn free_bytes(path: &Path) -> std::io::Result<u64> {
    let text = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))
        .map_err(std::io::Error::other)?;
    // SAFETY: statvfs writes into the zeroed struct it is given; the path is a valid C string.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(text.as_ptr(), &mut stats) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(stats.f_bavail.saturating_mul(stats.f_frsize))
}

/// FNV-1a, 64 bits: the cache folder of a URL.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_process_mirrors_a_url_at_a_time_and_leftovers_are_cleared() {
        let cache = tempfile::tempdir().expect("temp dir");
        let store = Store::open(&crate::StoreUrl::parse("s3://bucket/p").expect("url")).expect("opens");
        let first = Mirror::open(store.clone(), cache.path()).expect("the first opens");
        std::fs::create_dir_all(first.root.join("staging/new")).expect("a leftover");
        let error = Mirror::open(store.clone(), cache.path()).err().expect("a second is refused").to_string();
        assert!(error.contains("another mlprof process mirrors s3://bucket/p"), "{error}");
        drop(first);
        let again = Mirror::open(store, cache.path()).expect("free again");
        assert!(!again.root.join("staging").exists(), "an interrupted fetch leaves nothing behind");
        assert!(again.profiles().is_dir());
    }

    #[test]
    fn free_space_is_read() {
        assert!(free_bytes(Path::new("/")).expect("statvfs") > 0);
        assert!(free_bytes(Path::new("/no/such/dir")).is_err());
    }
}

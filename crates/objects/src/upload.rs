//! One saved session, uploaded under the store's prefix at the same place relative to
//! it as under the local log directory: `<logdir>/<run>/plugins/profile/<session>/F`
//! becomes `PREFIX/<run>/plugins/profile/<session>/F`, TensorBoard's layout.
//!
//! Memory stays bounded whatever the file's size: a file up to [`SINGLE_PUT_BYTES`] goes
//! in one request, a larger one in parts of [`PART_BYTES`], at most [`PARTS_IN_FLIGHT`]
//! of them at once; a failed upload is aborted (the store keeps no parts of it).

use std::path::Path;

use object_store::{ObjectStoreExt, PutPayload, WriteMultipart};
use tokio::io::AsyncReadExt;

use crate::store::{ObjectsError, Store};
use crate::url::StoreUrl;

/// The largest file uploaded in one request, bytes.
pub const SINGLE_PUT_BYTES: u64 = 16 << 20;
/// The size of each part of a larger file, bytes (S3 asks for at least 5 MiB).
pub const PART_BYTES: usize = 8 << 20;
/// The most parts sent at once.
pub const PARTS_IN_FLIGHT: usize = 4;

/// A session uploaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uploaded {
    /// Where its files are now.
    pub url: StoreUrl,
    /// How many files.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

impl Store {
    /// Uploads the regular files of `session` (a directory under `logdir`, not followed
    /// into subdirectories) to the same relative place under the prefix.
    pub async fn upload_session(&self, logdir: &Path, session: &Path) -> Result<Uploaded, ObjectsError> {
        let relative = session
            .strip_prefix(logdir)
            .map_err(|_| ObjectsError::local(session, format!("not under the log directory {}", logdir.display())))?;
        let parts: Vec<&str> = relative
            .iter()
            .map(|part| part.to_str().ok_or_else(|| ObjectsError::local(session, "a name that is not UTF-8")))
            .collect::<Result<_, _>>()?;
        let mut files = Vec::new();
        let entries = std::fs::read_dir(session).map_err(|e| ObjectsError::local(session, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| ObjectsError::local(session, e))?;
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if let (true, Some(name)) = (is_file, entry.file_name().to_str()) {
                files.push(name.to_string());
            }
        }
        files.sort();
        let url = self.url().join(parts.iter().copied());
        let mut bytes = 0;
        for name in &files {
            let key = self.key(parts.iter().copied().chain([name.as_str()]));
            bytes += self.upload_file(&session.join(name), &key).await?;
        }
        Ok(Uploaded { url, files: files.len(), bytes })
    }

    /// Uploads the file at `path` as `key`; its size in bytes.
    async fn upload_file(&self, path: &Path, key: &object_store::path::Path) -> Result<u64, ObjectsError> {
        let local = |e: std::io::Error| ObjectsError::local(path, e);
        let mut file = tokio::fs::File::open(path).await.map_err(local)?;
        let size = file.metadata().await.map_err(local)?.len();
        let failed = |e: object_store::Error| ObjectsError::store(&self.url_of(key), "upload", &e);
        if size <= SINGLE_PUT_BYTES {
            let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            (&mut file).take(SINGLE_PUT_BYTES).read_to_end(&mut data).await.map_err(local)?;
            let sent = data.len() as u64;
            self.inner().put(key, PutPayload::from(data)).await.map_err(failed)?;
            return Ok(sent);
        }
        let upload = self.inner().put_multipart(key).await.map_err(failed)?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        let mut buffer = vec![0; 1 << 20];
        let mut sent = 0u64;
        loop {
            let read = match file.read(&mut buffer).await {
                Ok(0) => break,
                Ok(read) => read,
                Err(error) => {
                    let _ = writer.abort().await;
                    return Err(local(error));
                }
            };
            if let Err(error) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                let _ = writer.abort().await;
                return Err(failed(error));
            }
            writer.write(&buffer[..read]);
            sent += read as u64;
        }
        writer.finish().await.map_err(failed)?;
        Ok(sent)
    }
}

//! `mlprof agent --upload s3://BUCKET/PREFIX`: every capture the agent saves is copied to
//! an object store in TensorBoard's layout, `PREFIX/<job>-<pid>/plugins/profile/<session>/`,
//! so XProf, TensorBoard and `mlprof serve` read it from there.
//!
//! The one design decision to know: uploading never holds a capture up. A saved
//! session joins a bounded queue that one task works through, a session at a time, each
//! tried [`TRIES`] times; a full queue, a refused upload or a store that is down costs a
//! line on stderr and a count in the snapshot and `/metrics`, never a capture. The local
//! copy stays under `--retain` like any other.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mlprof_objects::Store;
use serde::{Deserialize, Serialize};

/// Sessions that may wait for their upload.
pub const QUEUE: usize = 64;
/// How often a session's upload is tried.
pub const TRIES: u32 = 3;
/// The wait before the second try; each later try waits four times longer.
pub const FIRST_RETRY: Duration = Duration::from_secs(2);

/// Where captures go and how that went, for the snapshot and `/metrics`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UploadView {
    /// The store and prefix (`s3://bucket/prefix`).
    pub url: String,
    /// Sessions uploaded.
    pub uploaded: u64,
    /// Sessions whose upload failed (every try) or found the queue full.
    pub failed: u64,
    /// Sessions waiting or being uploaded.
    pub queued: u64,
    /// Where the last session uploaded went.
    #[serde(default)]
    pub last: Option<String>,
    /// Why the last failure failed.
    #[serde(default)]
    pub last_error: Option<String>,
}

/// The agent's upload queue.
#[derive(Clone)]
pub struct Uploads {
    sender: tokio::sync::mpsc::Sender<PathBuf>,
    view: Arc<Mutex<UploadView>>,
    store: Store,
    data_dir: PathBuf,
}

impl Uploads {
    /// Starts the task that uploads sessions saved under `data_dir` to `store`.
    pub fn start(store: Store, data_dir: PathBuf) -> Uploads {
        let (sender, receiver) = tokio::sync::mpsc::channel(QUEUE);
        let view = Arc::new(Mutex::new(UploadView { url: store.url().to_string(), ..UploadView::default() }));
        tokio::spawn(work(store.clone(), data_dir.clone(), receiver, Arc::clone(&view)));
        Uploads { sender, view, store, data_dir }
    }

    /// Queues `session` for upload; the line to say about it.
    pub fn enqueue(&self, session: &Path) -> String {
        let relative = session.strip_prefix(&self.data_dir).unwrap_or(session);
        let url = self.store.url().join(relative.iter().filter_map(|part| part.to_str()));
        // Counted before it is sent: the task may take it and count it done at once.
        self.update(|view| view.queued += 1);
        match self.sender.try_send(session.to_path_buf()) {
            Ok(()) => format!("uploading to {url}"),
            Err(_) => {
                let why = format!("not uploaded to {url}: {QUEUE} sessions are waiting for theirs");
                self.update(|view| {
                    view.queued = view.queued.saturating_sub(1);
                    view.failed += 1;
                    view.last_error = Some(why.clone());
                });
                eprintln!("mlprof agent: {}: {why}", session.display());
                why
            }
        }
    }

    /// How uploads went so far.
    pub fn view(&self) -> UploadView {
        self.view.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn update(&self, change: impl FnOnce(&mut UploadView)) {
        change(&mut self.view.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// Uploads each queued session in turn until the agent stops.
async fn work(
    store: Store,
    data_dir: PathBuf,
    mut queue: tokio::sync::mpsc::Receiver<PathBuf>,
    view: Arc<Mutex<UploadView>>,
) {
    while let Some(session) = queue.recv().await {
        let mut wait = FIRST_RETRY;
        let mut outcome = store.upload_session(&data_dir, &session).await;
        for _ in 1..TRIES {
            if outcome.is_ok() {
                break;
            }
            tokio::time::sleep(wait).await;
            wait *= 4;
            outcome = store.upload_session(&data_dir, &session).await;
        }
        let mut view = view.lock().unwrap_or_else(PoisonError::into_inner);
        view.queued = view.queued.saturating_sub(1);
        match outcome {
            Ok(uploaded) => {
                view.uploaded += 1;
                view.last = Some(uploaded.url.to_string());
            }
            Err(error) => {
                eprintln!("mlprof agent: {} is not uploaded: {error}", session.display());
                view.failed += 1;
                view.last_error = Some(error.to_string());
            }
        }
    }
}

//! `mlprof serve s3://BUCKET/PREFIX` (or `gs://…`): the store's profiles, mirrored into the
//! cache directory and served from there like any log directory, kept in step with the
//! store every [`SYNC_EVERY`] (new captures appear, the web server's rescan finds them).
//!
//! The first mirror must succeed (an unreachable store or a missing bucket is one line
//! and exit 2; a prefix with no profile that could be mirrored, one line and exit 1);
//! later ones that fail say so once on stderr and the server goes on with what it has.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mlprof_objects::{Mirror, Store, StoreUrl, Synced};

use crate::Failure;

/// How often the mirror is brought in step with the store.
pub const SYNC_EVERY: Duration = Duration::from_secs(10);

/// Mirrors `url` under `cache` and returns the directory to serve and the mirror.
pub async fn mirror(url: &str, cache: &Path) -> Result<(PathBuf, Mirror), Failure> {
    let url = StoreUrl::parse(url).map_err(|e| Failure::input(e.to_string()))?;
    let store = Store::open(&url).map_err(|e| Failure::input(e.to_string()))?;
    let mut mirror = Mirror::open(store, cache).map_err(|e| Failure::input(e.to_string()))?;
    let synced = mirror.sync().await.map_err(|e| Failure::input(e.to_string()))?;
    say_skipped(&synced, &mut Vec::new());
    if synced.sessions == 0 {
        const LAYOUT: &str = "<run>/plugins/profile/<session>/<host>.xplane.pb (or <worker>.pt.trace.json.gz) objects";
        return Err(Failure::nothing(match synced.skipped.len() {
            0 => format!("no profile found under {url}: expected {LAYOUT}"),
            // What was left out may be every profile there is: say so, not that none exists.
            left_out => {
                format!("no profile of {url} could be mirrored: {left_out} left out, each said above ({LAYOUT})")
            }
        }));
    }
    eprintln!(
        "mlprof serve: {} session(s) of {url} in {} ({} fetched, {})",
        synced.sessions,
        mirror.profiles().display(),
        synced.fetched,
        mlprof_model::human::bytes(synced.fetched_bytes as f64)
    );
    Ok((mirror.profiles(), mirror))
}

/// Brings `mirror` in step with its store every [`SYNC_EVERY`] while the server runs.
pub fn keep_in_step(mut mirror: Mirror) {
    tokio::spawn(async move {
        let mut said = Vec::new();
        let mut last_error = None;
        loop {
            tokio::time::sleep(SYNC_EVERY).await;
            match mirror.sync().await {
                Ok(synced) => {
                    last_error = None;
                    if synced.fetched > 0 || synced.removed > 0 {
                        eprintln!(
                            "mlprof serve: {} session(s) fetched, {} removed: {} in all",
                            synced.fetched, synced.removed, synced.sessions
                        );
                    }
                    say_skipped(&synced, &mut said);
                }
                Err(error) => {
                    let error = error.to_string();
                    if last_error.as_ref() != Some(&error) {
                        eprintln!("mlprof serve: the store cannot be read now (serving what was fetched): {error}");
                        last_error = Some(error);
                    }
                }
            }
        }
    });
}

/// Says each thing the mirror left out, once.
fn say_skipped(synced: &Synced, said: &mut Vec<String>) {
    for skipped in &synced.skipped {
        if !said.contains(skipped) {
            eprintln!("mlprof serve: skipped {skipped}");
            said.push(skipped.clone());
        }
    }
}

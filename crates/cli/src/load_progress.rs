//! A progress bar on stderr while profiles load: shown after half a second, when stderr
//! is a terminal and `--quiet` was not given; nothing otherwise (a pipe, a log file, the
//! tests). The readers count the bytes they decode ([`LoadProgress`]); a thread of its
//! own draws them, so a stalled reader never stalls the display, and the bar is cleared
//! before anything else is printed.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mlprof_formats::progress::LoadProgress;

/// How long a load runs before its bar appears (quick loads show nothing).
const SHOW_AFTER: Duration = Duration::from_millis(500);
/// How often the bar is redrawn.
const TICK: Duration = Duration::from_millis(100);

/// `--quiet`: no progress display.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Records `--quiet` for the whole run.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Runs `work` (a load), giving it a [`LoadProgress`] to count into and showing it as a bar
/// when there is a terminal to show it on.
pub fn loading<T>(work: impl FnOnce(Option<&Arc<LoadProgress>>) -> T) -> T {
    if QUIET.load(Ordering::Relaxed) || !std::io::stderr().is_terminal() {
        return work(None);
    }
    let progress = Arc::new(LoadProgress::default());
    let (stop, stopped) = mpsc::channel::<()>();
    let shown = Arc::clone(&progress);
    let display = thread::spawn(move || draw(&shown, &stopped));
    let result = work(Some(&progress));
    drop(stop);
    let _ = display.join();
    result
}

/// Draws `progress` every [`TICK`] from [`SHOW_AFTER`] on, until `stopped` disconnects;
/// then clears the bar.
fn draw(progress: &LoadProgress, stopped: &mpsc::Receiver<()>) {
    let started = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
        if started.elapsed() < SHOW_AFTER {
            continue;
        }
        let (read, total) = progress.snapshot();
        let bar = bar.get_or_insert_with(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template("reading {bytes}/{total_bytes} {wide_bar} {eta} left") {
                bar.set_style(style);
            }
            bar
        });
        bar.set_length(total);
        bar.set_position(read);
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}

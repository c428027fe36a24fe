//! Progress on stderr while profiles load or a conversion writes: shown after half a
//! second, when stderr is a terminal and `--quiet` was not given; nothing otherwise (a
//! pipe, a log file, the tests). The readers count the bytes they decode
//! ([`LoadProgress`]), the writers the bytes they write; a thread of its own draws them,
//! so stalled work never stalls the display, and the line is cleared before anything
//! else is printed.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    shown_while(work, draw_load)
}

/// Runs `work` (a conversion), giving it a count of bytes written to add to and showing
/// it, with the time so far, when there is a terminal to show it on.
pub fn writing<T>(work: impl FnOnce(Option<&Arc<AtomicU64>>) -> T) -> T {
    shown_while(work, draw_writing)
}

/// Runs `work` with a counter `draw` shows on its own thread until `work` returns.
fn shown_while<P: Default + Send + Sync + 'static, T>(
    work: impl FnOnce(Option<&Arc<P>>) -> T,
    draw: fn(&P, &mpsc::Receiver<()>),
) -> T {
    if QUIET.load(Ordering::Relaxed) || !std::io::stderr().is_terminal() {
        return work(None);
    }
    let progress = Arc::new(P::default());
    let (stop, stopped) = mpsc::channel::<()>();
    let shown = Arc::clone(&progress);
    let display = thread::spawn(move || draw(&shown, &stopped));
    let result = work(Some(&progress));
    drop(stop);
    let _ = display.join();
    result
}

/// A writer that adds the bytes it passes on to a count (see [`writing`]).
pub struct CountingWriter<'a, W: Write + ?Sized> {
    inner: &'a mut W,
    written: Option<&'a AtomicU64>,
}

impl<'a, W: Write + ?Sized> CountingWriter<'a, W> {
    /// Counts what goes through to `inner` into `written`, when there is one.
    pub fn new(inner: &'a mut W, written: Option<&'a AtomicU64>) -> CountingWriter<'a, W> {
        CountingWriter { inner, written }
    }
}

impl<W: Write + ?Sized> Write for CountingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        if let Some(written) = self.written {
            written.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Draws the bytes written, with the time so far, until `stopped` disconnects.
fn draw_writing(written: &AtomicU64, stopped: &mpsc::Receiver<()>) {
    draw_until_stopped(stopped, "{spinner} writing: {bytes} so far ({elapsed})", |line| {
        line.set_position(written.load(Ordering::Relaxed));
        line.tick();
    });
}

/// Draws `progress` as a bar of bytes decoded, until `stopped` disconnects.
fn draw_load(progress: &LoadProgress, stopped: &mpsc::Receiver<()>) {
    draw_until_stopped(stopped, "reading {bytes}/{total_bytes} {wide_bar} {eta} left", |bar| {
        let (read, total) = progress.snapshot();
        bar.set_length(total);
        bar.set_position(read);
    });
}

/// Shows a line in `template` (indicatif's) on stderr from [`SHOW_AFTER`] on, brought up
/// to date by `update` every [`TICK`], until `stopped` disconnects; then clears it.
fn draw_until_stopped(stopped: &mpsc::Receiver<()>, template: &str, update: impl Fn(&ProgressBar)) {
    let started = Instant::now();
    let mut line: Option<ProgressBar> = None;
    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
        if started.elapsed() < SHOW_AFTER {
            continue;
        }
        let line = line.get_or_insert_with(|| {
            let line = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(template) {
                line.set_style(style);
            }
            line
        });
        update(line);
    }
    if let Some(line) = line {
        line.finish_and_clear();
    }
}

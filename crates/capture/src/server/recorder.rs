//! The process-wide event recorder behind [`super::trace`], [`super::Profiler`] and the
//! gRPC server: per-thread event buffers and the table of recording sessions.
//!
//! The design decision to know: recording is gated by one global atomic, the number of
//! active sessions, so an annotation in a program nobody profiles costs one atomic load.
//! While a session is active, each finished event goes to its own thread's buffer
//! (a `Mutex<Vec<_>>` that only that thread and a stopping session ever lock, so it is
//! uncontended), plus one relaxed `fetch_add` on the global count that bounds memory —
//! there is no global lock per event. Buffers are registered once per thread in a
//! global list. Sessions may overlap: a stopping session takes the events that started
//! at or after its start and ended by its stop, and the buffers then keep only what
//! the sessions still recording may need (nothing once the last one stops).
//!
//! Times are nanoseconds since the Unix epoch, read from the monotonic clock and mapped
//! to the epoch once per process, so events never go backwards when the wall clock is
//! adjusted.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::annotation::ArgValue;
use super::error::ServerError;
use super::platform;

/// The most sessions that may record at the same time in one process (over the
/// in-process [`super::Profiler`] and every server).
pub const MAX_SESSIONS: usize = 16;
/// The per-session event cap used when none is given (the reference client's
/// `max_events`).
pub const DEFAULT_MAX_EVENTS: usize = 1_000_000;
/// The highest per-session event cap accepted; larger requests are lowered to it.
/// At roughly 100 bytes per buffered event this bounds the recorder to about 1 GB.
pub const MAX_EVENTS_LIMIT: usize = 10_000_000;

/// One finished event as a thread recorded it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RawEvent {
    /// Event name (becomes the XSpace event metadata name).
    pub name: Cow<'static, str>,
    /// Start, Unix epoch nanoseconds.
    pub start_ns: i64,
    /// End, Unix epoch nanoseconds.
    pub end_ns: i64,
    /// Typed arguments (become XSpace stats).
    pub args: Vec<(&'static str, ArgValue)>,
}

/// The events one thread recorded within a session's window.
#[derive(Debug)]
pub(crate) struct ThreadEvents {
    /// OS thread id.
    pub tid: i64,
    /// Thread name.
    pub name: String,
    /// The events, in the order they ended.
    pub events: Vec<RawEvent>,
}

/// What a finished session recorded.
#[derive(Debug)]
pub(crate) struct Collected {
    /// Session start, Unix epoch nanoseconds.
    pub start_ns: i64,
    /// Session stop, Unix epoch nanoseconds.
    pub stop_ns: i64,
    /// Events per thread (threads without events are left out).
    pub threads: Vec<ThreadEvents>,
    /// The session's event cap.
    pub max_events: usize,
    /// Events the recorder dropped while the session ran, because the buffers were full.
    pub dropped: u64,
    /// Events recorded in the window but left out because they exceeded `max_events`.
    pub truncated: usize,
}

impl Collected {
    /// A session that recorded nothing, at `now_ns`.
    pub(crate) fn empty(now_ns: i64, max_events: usize) -> Collected {
        Collected { start_ns: now_ns, stop_ns: now_ns, threads: Vec::new(), max_events, dropped: 0, truncated: 0 }
    }
}

/// Sessions recording now; the gate every annotation reads first.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Most events the buffers may hold together: the largest cap of the active sessions.
static CAP: AtomicUsize = AtomicUsize::new(0);
/// Events in all buffers (plus the few being pushed right now).
static BUFFERED: AtomicUsize = AtomicUsize::new(0);
/// Events dropped because `BUFFERED` reached `CAP`, since the process started.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Every thread that ever recorded while a session was active, until it has exited and
/// its buffer is empty.
static THREADS: Mutex<Vec<Arc<ThreadBuffer>>> = Mutex::new(Vec::new());
/// The active sessions.
static SESSIONS: Mutex<SessionTable> = Mutex::new(SessionTable { next_id: 0, active: Vec::new() });

struct ThreadBuffer {
    tid: i64,
    name: String,
    events: Mutex<Vec<RawEvent>>,
    exited: AtomicBool,
}

/// A thread's handle on its buffer; marks the buffer as orphaned when the thread exits.
struct LocalBuffer(Arc<ThreadBuffer>);

impl LocalBuffer {
    fn register() -> LocalBuffer {
        let tid = platform::current_tid();
        let name = std::thread::current().name().map_or_else(|| format!("Thread {tid}"), str::to_string);
        let buffer =
            Arc::new(ThreadBuffer { tid, name, events: Mutex::new(Vec::new()), exited: AtomicBool::new(false) });
        lock(&THREADS).push(Arc::clone(&buffer));
        LocalBuffer(buffer)
    }
}

impl Drop for LocalBuffer {
    fn drop(&mut self) {
        self.0.exited.store(true, Ordering::Release);
    }
}

thread_local! {
    static LOCAL: LocalBuffer = LocalBuffer::register();
}

struct SessionEntry {
    id: u64,
    start_ns: i64,
    max_events: usize,
}

struct SessionTable {
    next_id: u64,
    active: Vec<SessionEntry>,
}

/// Locks `mutex`, recovering the data if a thread panicked while holding it (every
/// critical section here leaves the data consistent).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Now, in nanoseconds since the Unix epoch, from the monotonic clock.
pub fn now_ns() -> i64 {
    static ORIGIN: OnceLock<(Instant, i64)> = OnceLock::new();
    let (instant, epoch_ns) = ORIGIN.get_or_init(|| {
        let epoch = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        (Instant::now(), i64::try_from(epoch).unwrap_or(i64::MAX))
    });
    let elapsed = i64::try_from(instant.elapsed().as_nanos()).unwrap_or(i64::MAX);
    epoch_ns.saturating_add(elapsed)
}

/// True while at least one session records. Annotations check this first; a program
/// can also use it to skip computing expensive arguments.
#[inline]
pub fn is_recording() -> bool {
    ACTIVE.load(Ordering::Acquire) != 0
}

/// Adds a finished event to the calling thread's buffer, unless no session records or
/// the buffers are full (then it counts as dropped).
pub(crate) fn record(event: RawEvent) {
    if !is_recording() {
        return;
    }
    if BUFFERED.fetch_add(1, Ordering::Relaxed) >= CAP.load(Ordering::Relaxed) {
        BUFFERED.fetch_sub(1, Ordering::Relaxed);
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // Fails only while the thread is being torn down; the event is then lost.
    if LOCAL.try_with(|local| lock(&local.0.events).push(event)).is_err() {
        BUFFERED.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A session recording now. Dropping it without [`Recording::finish`] ends the session
/// and discards its events (this is how a cancelled gRPC call cleans up).
#[derive(Debug)]
pub(crate) struct Recording {
    id: u64,
    start_ns: i64,
    max_events: usize,
    dropped_base: u64,
    done: bool,
}

/// Starts a session keeping at most `max_events` events (0: the default; capped at
/// [`MAX_EVENTS_LIMIT`]).
pub(crate) fn begin(max_events: usize) -> Result<Recording, ServerError> {
    let max_events = if max_events == 0 { DEFAULT_MAX_EVENTS } else { max_events.min(MAX_EVENTS_LIMIT) };
    let mut table = lock(&SESSIONS);
    if table.active.len() >= MAX_SESSIONS {
        return Err(ServerError::TooManySessions { max: MAX_SESSIONS });
    }
    if table.active.is_empty() {
        // Events that ended in the instant after the last session stopped.
        sweep(None, None);
    }
    let id = table.next_id;
    table.next_id += 1;
    let start_ns = now_ns();
    table.active.push(SessionEntry { id, start_ns, max_events });
    let dropped_base = DROPPED.load(Ordering::Relaxed);
    publish(&table);
    Ok(Recording { id, start_ns, max_events, dropped_base, done: false })
}

/// Publishes the table to the lock-free side: the cap first, then the gate.
fn publish(table: &SessionTable) {
    CAP.store(table.active.iter().map(|s| s.max_events).max().unwrap_or(0), Ordering::Relaxed);
    ACTIVE.store(table.active.len(), Ordering::Release);
}

impl Recording {
    /// Session start, Unix epoch nanoseconds.
    pub(crate) fn start_ns(&self) -> i64 {
        self.start_ns
    }

    /// Ends the session and returns the events recorded in its window.
    pub(crate) fn finish(mut self) -> Collected {
        self.end(true)
    }

    fn end(&mut self, collect: bool) -> Collected {
        self.done = true;
        let mut table = lock(&SESSIONS);
        let stop_ns = now_ns();
        table.active.retain(|s| s.id != self.id);
        publish(&table);
        let keep_from = table.active.iter().map(|s| s.start_ns).min();
        let dropped = DROPPED.load(Ordering::Relaxed).saturating_sub(self.dropped_base);
        let window = collect.then_some((self.start_ns, stop_ns));
        let mut threads = sweep(window, keep_from);
        drop(table);
        let truncated = truncate(&mut threads, self.max_events);
        Collected { start_ns: self.start_ns, stop_ns, threads, max_events: self.max_events, dropped, truncated }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if !self.done {
            self.end(false);
        }
    }
}

/// Takes the events inside `window` (start at or after its start, end by its end) out
/// of every buffer, keeps in the buffers only the events that start at or after
/// `keep_from` (nothing when `None`), and forgets exited threads with empty buffers.
fn sweep(window: Option<(i64, i64)>, keep_from: Option<i64>) -> Vec<ThreadEvents> {
    let mut out = Vec::new();
    let mut removed = 0usize;
    lock(&THREADS).retain(|buffer| {
        let mut events = lock(&buffer.events);
        let before = events.len();
        let mut taken = Vec::new();
        for event in std::mem::take(&mut *events) {
            let wanted = window.is_some_and(|(start, stop)| event.start_ns >= start && event.end_ns <= stop);
            let keep = keep_from.is_some_and(|from| event.start_ns >= from);
            match (wanted, keep) {
                (true, true) => {
                    taken.push(event.clone());
                    events.push(event);
                }
                (true, false) => taken.push(event),
                (false, true) => events.push(event),
                (false, false) => {}
            }
        }
        removed += before - events.len();
        if !taken.is_empty() {
            out.push(ThreadEvents { tid: buffer.tid, name: buffer.name.clone(), events: taken });
        }
        !(events.is_empty() && buffer.exited.load(Ordering::Acquire))
    });
    BUFFERED.fetch_sub(removed, Ordering::Relaxed);
    out
}

/// Keeps the `max_events` earliest-starting events over all threads; returns how many
/// were left out.
fn truncate(threads: &mut [ThreadEvents], max_events: usize) -> usize {
    let total: usize = threads.iter().map(|t| t.events.len()).sum();
    if total <= max_events {
        return 0;
    }
    let mut starts: Vec<i64> = threads.iter().flat_map(|t| t.events.iter().map(|e| e.start_ns)).collect();
    let (_, &mut first_out, _) = starts.select_nth_unstable(max_events);
    let below = starts.iter().filter(|&&s| s < first_out).count();
    // Events starting exactly at `first_out` fill the remaining budget in thread order.
    let mut ties_left = max_events - below;
    for thread in threads.iter_mut() {
        thread.events.retain(|e| {
            if e.start_ns < first_out {
                true
            } else if e.start_ns == first_out && ties_left > 0 {
                ties_left -= 1;
                true
            } else {
                false
            }
        });
    }
    total - max_events
}

/// Serialises the tests (here and in sibling modules) that use the process-wide
/// recorder, since the test harness runs tests on parallel threads.
#[cfg(test)]
pub(crate) fn test_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    lock(&LOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &'static str, start_ns: i64, end_ns: i64) -> RawEvent {
        RawEvent { name: Cow::Borrowed(name), start_ns, end_ns, args: Vec::new() }
    }

    fn names(c: &Collected) -> Vec<String> {
        let mut v: Vec<String> = c.threads.iter().flat_map(|t| t.events.iter().map(|e| e.name.to_string())).collect();
        v.sort();
        v
    }

    /// Records an event spanning "now" (so it lies inside every active session).
    fn record_now(name: &'static str) {
        let now = now_ns();
        record(event(name, now, now));
    }

    #[test]
    fn nothing_is_recorded_without_a_session() {
        let _serial = test_lock();
        record_now("before");
        assert!(!is_recording());
        let session = begin(0).unwrap();
        assert!(is_recording());
        record_now("during");
        let got = session.finish();
        assert!(!is_recording());
        assert_eq!(names(&got), ["during"]);
        assert_eq!(BUFFERED.load(Ordering::Relaxed), 0, "buffers are cleared when no session needs them");
    }

    #[test]
    fn each_session_gets_the_events_of_its_own_window() {
        let _serial = test_lock();
        let a = begin(0).unwrap();
        record_now("a only");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = begin(0).unwrap();
        record_now("a and b");
        let got_a = a.finish();
        assert!(is_recording(), "b still records");
        record_now("b only");
        // An event that started before b: b's window excludes it.
        let early = b.start_ns() - 1;
        record(event("started before b", early, now_ns()));
        let got_b = b.finish();
        assert_eq!(names(&got_a), ["a and b", "a only"]);
        assert_eq!(names(&got_b), ["a and b", "b only"]);
        assert!(got_a.start_ns < got_b.start_ns && got_a.stop_ns <= got_b.stop_ns);
        assert_eq!(BUFFERED.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn events_of_other_threads_are_collected_with_their_thread() {
        let _serial = test_lock();
        let session = begin(0).unwrap();
        std::thread::Builder::new().name("worker-7".into()).spawn(|| record_now("on worker")).unwrap().join().unwrap();
        record_now("on test thread");
        let got = session.finish();
        let worker = got.threads.iter().find(|t| t.name == "worker-7").expect("the worker's line");
        assert_eq!(worker.events.len(), 1);
        assert_ne!(worker.tid, platform::current_tid());
        // The exited worker's empty buffer is forgotten.
        assert!(lock(&THREADS).iter().all(|b| b.name != "worker-7"));
    }

    #[test]
    fn the_buffer_cap_drops_and_counts_extra_events() {
        let _serial = test_lock();
        let session = begin(3).unwrap();
        for _ in 0..5 {
            record_now("e");
        }
        let got = session.finish();
        assert_eq!(got.threads.iter().map(|t| t.events.len()).sum::<usize>(), 3);
        assert_eq!(got.dropped, 2);
        assert_eq!(got.max_events, 3);
    }

    #[test]
    fn a_session_with_a_smaller_cap_keeps_its_earliest_events() {
        let _serial = test_lock();
        let big = begin(100).unwrap();
        let small = begin(2).unwrap();
        let t0 = small.start_ns();
        for (i, name) in ["third", "first", "second"].into_iter().enumerate() {
            let start = t0 + [3, 1, 2][i];
            record(event(name, start, start));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        let got = small.finish();
        assert_eq!(names(&got), ["first", "second"]);
        assert_eq!((got.truncated, got.dropped), (1, 0));
        assert_eq!(big.finish().threads[0].events.len(), 3);
    }

    #[test]
    fn sessions_are_bounded_and_dropping_one_ends_it() {
        let _serial = test_lock();
        let sessions: Vec<Recording> = (0..MAX_SESSIONS).map(|_| begin(0).unwrap()).collect();
        assert!(matches!(begin(0), Err(ServerError::TooManySessions { max: MAX_SESSIONS })));
        drop(sessions);
        assert!(!is_recording());
        assert!(begin(0).is_ok());
        assert!(!is_recording());
    }

    #[test]
    fn caps_are_clamped() {
        let _serial = test_lock();
        assert_eq!(begin(0).unwrap().finish().max_events, DEFAULT_MAX_EVENTS);
        assert_eq!(begin(usize::MAX).unwrap().finish().max_events, MAX_EVENTS_LIMIT);
    }
}

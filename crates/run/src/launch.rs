//! Starting the job and ending with it: the child process with its standard streams
//! untouched, signals sent to mlprof passed on to it, and its exit status turned into
//! mlprof's exit code.
//!
//! The one decision: a signal is forwarded only when another process sent it (`kill`,
//! a supervisor, `timeout`). Signals the terminal generates (Ctrl-C, Ctrl-\, hang-up) go
//! to the whole foreground process group, the job included, so forwarding those would
//! deliver them twice. Either way mlprof itself does not die of them while the job runs:
//! it waits for the job and then writes what it collected.
//!
//! While CUDA processes of the job are recording through `mlprof-inject`, a forwarded
//! signal first asks them to flush what CUPTI holds (at most [`FLUSH_BEFORE_SIGNAL`]):
//! a process killed by SIGTERM runs no exit handler, and the injection installs no
//! signal handler of its own, so this is the signal path's flush. The handler only
//! writes the signal to a pipe; a thread of mlprof's does the waiting and the `kill`,
//! and forwards at the deadline whatever happens to the flush.

use std::ffi::OsString;
use std::io;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The signals passed on to the job.
pub const FORWARDED_SIGNALS: [libc::c_int; 6] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2];

/// The job's pid while it runs (0 otherwise), read by the signal handler.
static JOB_PID: AtomicI32 = AtomicI32::new(0);
/// Whether a forwarded signal waits for a flush first (set while CUDA processes record).
static FLUSH_FIRST: AtomicBool = AtomicBool::new(false);
/// The write end of the pipe the handler hands deferred signals to (-1: none).
static DEFERRED_WRITE: AtomicI32 = AtomicI32::new(-1);
/// What flushes before a deferred signal is forwarded: asks and waits at most the given
/// time.
type Flusher = Box<dyn Fn(Duration) + Send + Sync>;
static FLUSHER: OnceLock<Mutex<Option<Flusher>>> = OnceLock::new();

/// The longest a forwarded signal waits for the CUDA processes' flush.
pub const FLUSH_BEFORE_SIGNAL: Duration = Duration::from_millis(300);

/// Sets what runs before a deferred signal is forwarded (see the module docs).
pub fn set_flusher(flusher: Flusher) {
    let slot = FLUSHER.get_or_init(|| Mutex::new(None));
    *slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(flusher);
}

/// Whether forwarded signals wait for a flush first.
pub fn flush_before_signals(on: bool) {
    FLUSH_FIRST.store(on, Ordering::SeqCst);
}

/// What to launch.
#[derive(Clone, Debug)]
pub struct JobCommand {
    /// The program and its arguments.
    pub argv: Vec<OsString>,
    /// Variables added to (or replacing those in) mlprof's environment.
    pub env: Vec<(OsString, OsString)>,
}

/// Starts the job and installs the forwarding handlers.
pub fn spawn(job: &JobCommand) -> io::Result<Child> {
    let (program, args) =
        job.argv.split_first().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command to run"))?;
    let child = Command::new(program).args(args).envs(job.env.iter().map(|(k, v)| (k, v))).spawn()?;
    let pid = i32::try_from(child.id()).unwrap_or(0);
    JOB_PID.store(pid, Ordering::SeqCst);
    start_deferred_forwarding();
    install_forwarding();
    Ok(child)
}

/// Marks the job as gone: signals are no longer forwarded (but still do not kill mlprof
/// until [`restore_signals`]).
pub fn job_ended() {
    JOB_PID.store(0, Ordering::SeqCst);
}

/// Puts the default dispositions back for every forwarded signal.
pub fn restore_signals() {
    for signal in FORWARDED_SIGNALS {
        // SAFETY: SIG_DFL is a valid disposition for these signals.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
    }
}

/// mlprof's exit code for the job's exit status: its code, or 128 + the signal that
/// killed it, as shells report it.
pub fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from((128 + signal) & 0xff).unwrap_or(1),
        (None, None) => 1,
    }
}

/// How the job ended, in words: `exited with code 3`, `was killed by signal 9 (SIGKILL)`.
pub fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal} ({})", signal_name(signal)),
        (None, None) => "ended".to_string(),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGKILL => "SIGKILL",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => "?",
    }
}

fn install_forwarding() {
    for signal in FORWARDED_SIGNALS {
        // SAFETY: a zeroed sigaction is valid; the handler has the SA_SIGINFO signature
        // and only calls kill(2), which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = forward as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Makes the pipe and the thread that forward deferred signals; without them every
/// signal is forwarded at once.
fn start_deferred_forwarding() {
    if DEFERRED_WRITE.load(Ordering::SeqCst) >= 0 {
        return;
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let [read, write] = fds;
    let spawned = std::thread::Builder::new().name("mlprof-signals".into()).spawn(move || {
        let mut byte = [0u8; 1];
        // SAFETY: `read` is this thread's own descriptor and `byte` has room for one byte.
        while unsafe { libc::read(read, byte.as_mut_ptr().cast(), 1) } == 1 {
            if let Some(slot) = FLUSHER.get()
                && let Ok(guard) = slot.lock()
                && let Some(flush) = guard.as_ref()
            {
                flush(FLUSH_BEFORE_SIGNAL);
            }
            let pid = JOB_PID.load(Ordering::SeqCst);
            if pid > 0 {
                // SAFETY: kill(2) with a pid and a signal number; a stale pid is ESRCH.
                unsafe { libc::kill(pid, libc::c_int::from(byte[0])) };
            }
        }
    });
    if spawned.is_ok() {
        DEFERRED_WRITE.store(write, Ordering::SeqCst);
    }
}

/// The handler: passes a signal another process sent on to the job.
extern "C" fn forward(signal: libc::c_int, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    // SAFETY: the kernel hands SA_SIGINFO handlers a valid siginfo_t.
    let code = if info.is_null() { 0 } else { unsafe { (*info).si_code } };
    // si_code ≤ 0: sent by a process (SI_USER, SI_QUEUE, SI_TKILL); > 0: by the kernel,
    // which for these signals means the terminal, and the job got it too.
    if code > 0 {
        return;
    }
    let pid = JOB_PID.load(Ordering::SeqCst);
    if pid <= 0 {
        return;
    }
    let deferred = DEFERRED_WRITE.load(Ordering::SeqCst);
    if FLUSH_FIRST.load(Ordering::SeqCst) && deferred >= 0 && u8::try_from(signal).is_ok() {
        let byte = [signal as u8];
        // SAFETY: write(2) is async-signal-safe; one byte from a live array.
        if unsafe { libc::write(deferred, byte.as_ptr().cast(), 1) } == 1 {
            return;
        }
    }
    // SAFETY: kill(2) is async-signal-safe; a stale pid is at worst ESRCH.
    unsafe { libc::kill(pid, signal) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
        assert_eq!(describe_exit(ExitStatus::from_raw(libc::SIGTERM)), "was killed by signal 15 (SIGTERM)");
        assert_eq!(describe_exit(ExitStatus::from_raw(0)), "exited with code 0");
    }
}

//! What `mlprof top`'s interactive screen shows and how its keys change it: the order of
//! the jobs (a column, either way), the selected job (kept by pid across refreshes), the
//! job followed in detail, the captures asked for and what they gave, and the overview
//! of a capture opened. Pure: no terminal, no network, so every key is unit-tested;
//! [`crate::top_screen`] draws it and does what [`Action`] says.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;

use crate::{CaptureOutcome, JobView, Snapshot};

/// CPU readings kept per job for its chart (one per refresh).
pub const CPU_HISTORY: usize = 120;

/// A column the jobs are ordered by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// CPU, percent of a core.
    Cpu,
    /// Resident memory.
    Memory,
    /// GPU busy share.
    Gpu,
    /// Last probed step time.
    Step,
    /// Step time trend.
    Trend,
    /// Process id.
    Pid,
    /// Job name.
    Name,
}

impl SortBy {
    /// Every column, in the order `s` steps through them.
    pub const ALL: [SortBy; 7] =
        [SortBy::Cpu, SortBy::Memory, SortBy::Gpu, SortBy::Step, SortBy::Trend, SortBy::Pid, SortBy::Name];

    /// Its header.
    pub fn label(self) -> &'static str {
        match self {
            SortBy::Cpu => "CPU%",
            SortBy::Memory => "MEM",
            SortBy::Gpu => "GPU",
            SortBy::Step => "STEP",
            SortBy::Trend => "TREND",
            SortBy::Pid => "PID",
            SortBy::Name => "JOB",
        }
    }

    /// Whether its natural order is the largest first.
    fn descending(self) -> bool {
        !matches!(self, SortBy::Pid | SortBy::Name)
    }

    /// `a` against `b` in this column, smallest first; unknown values last either way is
    /// left to the caller.
    fn compare(self, a: &JobView, b: &JobView) -> std::cmp::Ordering {
        let number = |job: &JobView| -> Option<f64> {
            match self {
                SortBy::Cpu => Some(job.cpu_percent),
                SortBy::Memory => Some(job.rss_bytes as f64),
                SortBy::Gpu => job.gpu_busy_percent,
                SortBy::Step => job.probe.as_ref().filter(|p| p.steps > 0).map(|p| p.step_time_ms),
                SortBy::Trend => job.step_trend_percent,
                SortBy::Pid => Some(f64::from(job.pid)),
                SortBy::Name => None,
            }
        };
        match self {
            SortBy::Name => a.name.cmp(&b.name),
            _ => {
                let (x, y) = (number(a).unwrap_or(f64::NEG_INFINITY), number(b).unwrap_or(f64::NEG_INFINITY));
                x.total_cmp(&y)
            }
        }
    }
}

/// A key, as the screen reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// Up arrow (or `k`).
    Up,
    /// Down arrow (or `j`).
    Down,
    /// Page up.
    PageUp,
    /// Page down.
    PageDown,
    /// Enter.
    Enter,
    /// Escape.
    Esc,
    /// Ctrl-C.
    Interrupt,
    /// Any other character.
    Char(char),
}

/// What the screen shows.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// Every job.
    List,
    /// One job in detail.
    Follow(u32),
    /// The overview of a capture, scrolled by `scroll` lines.
    Opened {
        /// What it is.
        title: String,
        /// Its lines.
        lines: Vec<String>,
        /// The first line shown.
        scroll: usize,
    },
}

/// What the screen must do after a key.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Nothing but draw again.
    None,
    /// Leave.
    Quit,
    /// Capture job `pid` (2 s).
    Capture(u32),
    /// Read the overview of job `pid`'s capture `session`.
    Open(u32, PathBuf),
}

/// The screen's state.
pub struct TopState {
    /// The latest snapshot.
    pub snapshot: Snapshot,
    /// The column the jobs are ordered by.
    pub sort: SortBy,
    /// Whether the order is the column's natural one reversed.
    pub reversed: bool,
    /// The selected job.
    pub selected: Option<u32>,
    /// What is shown.
    pub mode: Mode,
    /// The last thing said (a capture started, ended, failed).
    pub status: String,
    /// Captures taken from this screen, by job.
    captures: HashMap<u32, PathBuf>,
    /// Captures running, by job.
    capturing: Vec<u32>,
    /// Each job's CPU at each refresh, oldest first.
    cpu: HashMap<u32, VecDeque<f64>>,
}

impl Default for TopState {
    fn default() -> TopState {
        TopState {
            snapshot: Snapshot::default(),
            sort: SortBy::Cpu,
            reversed: false,
            selected: None,
            mode: Mode::List,
            status: String::new(),
            captures: HashMap::new(),
            capturing: Vec::new(),
            cpu: HashMap::new(),
        }
    }
}

impl TopState {
    /// A new snapshot: the selection stays on its job while it lives (else the first).
    pub fn update(&mut self, snapshot: Snapshot) {
        self.cpu.retain(|pid, _| snapshot.jobs.iter().any(|j| j.pid == *pid));
        for job in &snapshot.jobs {
            let readings = self.cpu.entry(job.pid).or_default();
            readings.push_back(job.cpu_percent);
            if readings.len() > CPU_HISTORY {
                readings.pop_front();
            }
        }
        self.snapshot = snapshot;
        let jobs = self.jobs();
        if self.selected.is_none_or(|pid| !jobs.iter().any(|j| j.pid == pid)) {
            self.selected = jobs.first().map(|j| j.pid);
        }
        if let Mode::Follow(pid) = self.mode
            && !self.snapshot.jobs.iter().any(|j| j.pid == pid)
        {
            self.status = format!("pid {pid} has ended");
            self.mode = Mode::List;
        }
    }

    /// Selects and follows job `pid`.
    pub fn follow(&mut self, pid: u32) {
        self.selected = Some(pid);
        self.mode = Mode::Follow(pid);
    }

    /// The jobs in the chosen order.
    pub fn jobs(&self) -> Vec<&JobView> {
        let mut jobs: Vec<&JobView> = self.snapshot.jobs.iter().collect();
        jobs.sort_by(|a, b| {
            let natural = self.sort.compare(a, b);
            let natural = if self.sort.descending() { natural.reverse() } else { natural };
            let ordered = if self.reversed { natural.reverse() } else { natural };
            ordered.then(a.pid.cmp(&b.pid))
        });
        jobs
    }

    /// The job followed or selected.
    pub fn job(&self, pid: u32) -> Option<&JobView> {
        self.snapshot.jobs.iter().find(|j| j.pid == pid)
    }

    /// Job `pid`'s CPU readings, oldest first.
    pub fn cpu_history(&self, pid: u32) -> Vec<f64> {
        self.cpu.get(&pid).map(|r| r.iter().copied().collect()).unwrap_or_default()
    }

    /// Whether job `pid` is being captured.
    pub fn is_capturing(&self, pid: u32) -> bool {
        self.capturing.contains(&pid)
    }

    /// Job `pid`'s last capture: one taken here, else the one its slowdown started.
    pub fn last_capture(&self, pid: u32) -> Option<PathBuf> {
        self.captures.get(&pid).cloned().or_else(|| self.job(pid)?.slowdown_capture.clone())
    }

    /// Takes a key; `rows` is how many jobs fit on a page.
    pub fn key(&mut self, key: Key, rows: usize) -> Action {
        if let Mode::Opened { scroll, lines, .. } = &mut self.mode {
            let last = lines.len().saturating_sub(1);
            match key {
                Key::Up | Key::Char('k') => *scroll = scroll.saturating_sub(1),
                Key::Down | Key::Char('j') => *scroll = (*scroll + 1).min(last),
                Key::PageUp => *scroll = scroll.saturating_sub(rows.max(1)),
                Key::PageDown | Key::Char(' ') => *scroll = (*scroll + rows.max(1)).min(last),
                Key::Esc | Key::Char('o') => self.mode = Mode::List,
                Key::Interrupt | Key::Char('q') => return Action::Quit,
                _ => {}
            }
            return Action::None;
        }
        let target = match self.mode {
            Mode::Follow(pid) => Some(pid),
            _ => self.selected,
        };
        match key {
            Key::Interrupt | Key::Char('q') => return Action::Quit,
            Key::Up | Key::Char('k') => self.step_selection(-1),
            Key::Down | Key::Char('j') => self.step_selection(1),
            Key::PageUp => self.step_selection(-(rows.max(1) as isize)),
            Key::PageDown => self.step_selection(rows.max(1) as isize),
            Key::Char('s') => {
                let at = SortBy::ALL.iter().position(|s| *s == self.sort).unwrap_or(0);
                self.sort = SortBy::ALL[(at + 1) % SortBy::ALL.len()];
                self.reversed = false;
            }
            Key::Char('r') => self.reversed = !self.reversed,
            Key::Enter | Key::Char('f') => {
                if let Some(pid) = self.selected {
                    self.mode = if self.mode == Mode::Follow(pid) { Mode::List } else { Mode::Follow(pid) };
                }
            }
            Key::Esc => self.mode = Mode::List,
            Key::Char('c') => {
                let Some(pid) = target else { return Action::None };
                if self.is_capturing(pid) {
                    self.status = format!("pid {pid} is being captured already");
                    return Action::None;
                }
                self.capturing.push(pid);
                self.status = format!("capturing pid {pid} for 2 s…");
                return Action::Capture(pid);
            }
            Key::Char('o') => {
                let Some(pid) = target else { return Action::None };
                match self.last_capture(pid) {
                    Some(session) => {
                        self.status = format!("reading {}…", session.display());
                        return Action::Open(pid, session);
                    }
                    None => self.status = format!("pid {pid} has no capture yet: c captures it"),
                }
            }
            _ => {}
        }
        Action::None
    }

    /// Moves the selection `by` jobs in the current order.
    fn step_selection(&mut self, by: isize) {
        let pids: Vec<u32> = self.jobs().iter().map(|j| j.pid).collect();
        if pids.is_empty() {
            return;
        }
        let at = self.selected.and_then(|pid| pids.iter().position(|p| *p == pid)).unwrap_or(0);
        let to = (at as isize + by).clamp(0, pids.len() as isize - 1) as usize;
        self.selected = Some(pids[to]);
        if let Mode::Follow(_) = self.mode {
            self.mode = Mode::Follow(pids[to]);
        }
    }

    /// A capture of job `pid` ended.
    pub fn captured(&mut self, pid: u32, outcome: Result<CaptureOutcome, String>) {
        self.capturing.retain(|p| *p != pid);
        self.status = match outcome {
            Ok(CaptureOutcome { session: Some(session), .. }) => {
                let said = format!("pid {pid}: captured {} (o opens it)", session.display());
                self.captures.insert(pid, session);
                said
            }
            Ok(outcome) => format!("pid {pid}: nothing captured: {}", outcome.lines.join("; ")),
            Err(why) => format!("pid {pid}: the capture failed: {why}"),
        };
    }

    /// The overview of job `pid`'s capture `session` was read (or could not be).
    pub fn opened(&mut self, pid: u32, session: PathBuf, text: Result<String, String>) {
        match text {
            Ok(text) => {
                self.status = String::new();
                self.mode = Mode::Opened {
                    title: format!("pid {pid}: {}", session.display()),
                    lines: text.lines().map(str::to_string).collect(),
                    scroll: 0,
                };
            }
            Err(why) => self.status = format!("pid {pid}: cannot read {}: {why}", session.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> Snapshot {
        let busy = JobView::example();
        let idle = JobView {
            pid: 7,
            name: "serve.py".into(),
            cpu_percent: 3.0,
            rss_bytes: 1 << 27,
            probe: None,
            ..JobView::example()
        };
        let big =
            JobView { pid: 9, name: "etl.py".into(), cpu_percent: 50.0, rss_bytes: 9_000_000_000, ..busy.clone() };
        Snapshot { jobs: vec![idle, busy, big], ..Snapshot::default() }
    }

    fn order(state: &TopState) -> Vec<u32> {
        state.jobs().iter().map(|j| j.pid).collect()
    }

    #[test]
    fn sorting_steps_through_the_columns_and_reverses() {
        let mut state = TopState::default();
        state.update(snapshot());
        assert_eq!(order(&state), [4242, 9, 7], "CPU, the busiest first");
        assert_eq!(state.selected, Some(4242));
        state.key(Key::Char('s'), 10);
        assert_eq!((state.sort, order(&state)), (SortBy::Memory, vec![9, 4242, 7]));
        state.key(Key::Char('r'), 10);
        assert_eq!(order(&state), [7, 4242, 9]);
        for _ in 0..5 {
            state.key(Key::Char('s'), 10);
        }
        assert_eq!((state.sort, order(&state)), (SortBy::Name, vec![9, 7, 4242]), "names from a to z");
        state.key(Key::Char('s'), 10);
        assert_eq!(state.sort, SortBy::Cpu, "round again");
    }

    #[test]
    fn the_selection_follows_its_job_and_keys_move_it() {
        let mut state = TopState::default();
        state.update(snapshot());
        state.key(Key::Down, 10);
        assert_eq!(state.selected, Some(9));
        state.key(Key::PageDown, 10);
        assert_eq!(state.selected, Some(7), "stops at the last");
        let mut next = snapshot();
        next.jobs[0].cpu_percent = 500.0;
        state.update(next);
        assert_eq!((order(&state)[0], state.selected), (7, Some(7)), "the selection stays on its job");
        let mut gone = snapshot();
        gone.jobs.retain(|j| j.pid != 7);
        state.update(gone);
        assert_eq!(state.selected, Some(4242), "its job ended: the first");
        assert_eq!(state.cpu_history(4242).len(), 3);
        assert!(state.cpu_history(7).is_empty());
    }

    #[test]
    fn follow_capture_and_open() {
        let mut state = TopState::default();
        state.update(snapshot());
        assert_eq!(state.key(Key::Char('o'), 10), Action::None);
        assert!(state.status.contains("no capture yet"), "{}", state.status);
        assert_eq!(state.key(Key::Enter, 10), Action::None);
        assert_eq!(state.mode, Mode::Follow(4242));
        assert_eq!(state.key(Key::Char('c'), 10), Action::Capture(4242));
        assert_eq!(state.key(Key::Char('c'), 10), Action::None, "one capture of a job at a time");
        let session = PathBuf::from("/data/train.py-4242/plugins/profile/s1");
        state.captured(4242, Ok(CaptureOutcome { pid: 4242, session: Some(session.clone()), ..Default::default() }));
        assert!(state.status.contains("o opens it"));
        assert_eq!(state.key(Key::Char('o'), 10), Action::Open(4242, session.clone()));
        state.opened(4242, session, Ok("Steps: 104\nInput: 12 %\n".into()));
        assert!(matches!(&state.mode, Mode::Opened { lines, .. } if lines.len() == 2));
        state.key(Key::Down, 10);
        state.key(Key::Down, 10);
        assert!(matches!(&state.mode, Mode::Opened { scroll: 1, .. }), "stops at the last line");
        state.key(Key::Esc, 10);
        assert_eq!(state.mode, Mode::List);
        state.captured(9, Err("no agent".into()));
        assert!(state.status.contains("the capture failed: no agent"));
        assert_eq!(state.key(Key::Char('q'), 10), Action::Quit);
    }

    #[test]
    fn a_followed_job_that_ends_goes_back_to_the_list() {
        let mut state = TopState::default();
        state.update(snapshot());
        state.follow(7);
        assert_eq!((state.selected, state.key(Key::Char('c'), 10)), (Some(7), Action::Capture(7)));
        state.update(Snapshot::default());
        assert_eq!(state.mode, Mode::List);
        assert_eq!(state.selected, None);
        assert!(state.status.contains("has ended"));
        assert_eq!(state.key(Key::Char('c'), 10), Action::None, "nothing to capture");
    }
}

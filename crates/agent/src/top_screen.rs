//! `mlprof top` on a terminal: the jobs refreshed every second in a table, with keys
//! ([`crate::top_state`]) to sort, select, follow one job in detail (its identity, CPU
//! chart, probed step times, top Python frames), capture it and read its last capture
//! (the overview and the busiest Python code) without leaving. The agent is asked on threads of their own (a snapshot
//! each second, each capture, each overview), so keys are answered at once; the terminal
//! is given back as it was on every way out, a panic included.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Sparkline, Table, TableState};

use crate::top::{HEADERS, WIDTHS, cells, title};
use crate::top_state::{Action, Key, Mode, TopState};
use crate::{CaptureOutcome, Snapshot, client};
use mlprof_model::human;

/// How often the agent is asked.
const REFRESH: Duration = Duration::from_secs(1);
/// How long a capture from the screen records.
const CAPTURE: Duration = Duration::from_secs(2);
/// The keys, as the last line shows them.
const HELP: &str =
    "↑↓ select · s sort · r reverse · f follow · c capture 2 s · o open last capture · esc back · q quit";

/// What the threads report.
enum Report {
    Snapshot(Result<Snapshot, String>),
    Captured(u32, Result<CaptureOutcome, String>),
    Opened(u32, PathBuf, Result<String, String>),
}

/// Whether the screen can run here: stdin and stdout are terminals.
pub fn available() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// Runs the screen against the agent at `address` until `q` or Ctrl-C, following job
/// `follow` from the start where given.
pub fn run(address: SocketAddr, token: Option<String>, follow: Option<u32>) -> Result<(), String> {
    // The first snapshot before the screen: an agent that is not there, or a job it does
    // not see, is said plainly.
    let first = client::snapshot(address, token.as_deref())?;
    if let Some(pid) = follow.filter(|pid| !first.jobs.iter().any(|j| j.pid == *pid)) {
        return Err(format!("the agent at {address} sees no job with pid {pid} (mlprof top --once lists them)"));
    }
    let (reports, received) = mpsc::channel();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    spawn_refresher(address, token.clone(), reports.clone(), stop.clone());
    let mut terminal = ratatui::try_init().map_err(|e| format!("the terminal: {e}"))?;
    let mut state = TopState::default();
    state.update(first);
    if let Some(pid) = follow {
        state.follow(pid);
    }
    let outcome = (|| -> Result<(), String> {
        let mut rows = 10;
        loop {
            for report in received.try_iter() {
                match report {
                    Report::Snapshot(Ok(snapshot)) => state.update(snapshot),
                    Report::Snapshot(Err(why)) => state.status = why,
                    Report::Captured(pid, outcome) => state.captured(pid, outcome),
                    Report::Opened(pid, session, text) => state.opened(pid, session, text),
                }
            }
            terminal
                .draw(|frame| {
                    rows = frame.area().height.saturating_sub(4) as usize;
                    draw(frame, &state);
                })
                .map_err(|e| format!("the terminal: {e}"))?;
            if !event::poll(Duration::from_millis(100)).map_err(|e| format!("the terminal: {e}"))? {
                continue;
            }
            let Event::Key(pressed) = event::read().map_err(|e| format!("the terminal: {e}"))? else { continue };
            if pressed.kind != KeyEventKind::Press {
                continue;
            }
            let key = match pressed.code {
                KeyCode::Char('c') if pressed.modifiers.contains(KeyModifiers::CONTROL) => Key::Interrupt,
                KeyCode::Up => Key::Up,
                KeyCode::Down => Key::Down,
                KeyCode::PageUp => Key::PageUp,
                KeyCode::PageDown => Key::PageDown,
                KeyCode::Enter => Key::Enter,
                KeyCode::Esc => Key::Esc,
                KeyCode::Char(c) => Key::Char(c),
                _ => continue,
            };
            match state.key(key, rows) {
                Action::None => {}
                Action::Quit => return Ok(()),
                Action::Capture(pid) => spawn_capture(address, token.clone(), pid, reports.clone()),
                Action::Open(pid, session) => spawn_open(pid, session, reports.clone()),
            }
        }
    })();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    ratatui::restore();
    outcome
}

/// Asks the agent for a snapshot every [`REFRESH`] until `stop`.
fn spawn_refresher(
    address: SocketAddr,
    token: Option<String>,
    reports: mpsc::Sender<Report>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    std::thread::spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let asked = Instant::now();
            if reports.send(Report::Snapshot(client::snapshot(address, token.as_deref()))).is_err() {
                return;
            }
            std::thread::sleep(REFRESH.saturating_sub(asked.elapsed()));
        }
    });
}

fn spawn_capture(address: SocketAddr, token: Option<String>, pid: u32, reports: mpsc::Sender<Report>) {
    std::thread::spawn(move || {
        let outcome = client::capture(address, pid, CAPTURE, token.as_deref());
        let _ = reports.send(Report::Captured(pid, outcome));
    });
}

/// Reads what `session` holds with this mlprof: the overview (steps, where their time
/// goes), then the Python code its samples found busiest (`mlprof analyze SESSION --tool
/// overview_page`, `--tool python`); either may have nothing to say.
fn spawn_open(pid: u32, session: PathBuf, reports: mpsc::Sender<Report>) {
    std::thread::spawn(move || {
        let analyze = |tool: &str| -> Result<String, String> {
            let mlprof = std::env::current_exe().map_err(|e| e.to_string())?;
            let out = std::process::Command::new(mlprof)
                .arg("analyze")
                .arg(&session)
                .args(["--tool", tool])
                .env("COLUMNS", "160")
                .stdin(std::process::Stdio::null())
                .output()
                .map_err(|e| e.to_string())?;
            match out.status.success() {
                true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
                false => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
            }
        };
        let text = match (analyze("overview_page"), analyze("python")) {
            (Err(why), Err(_)) => Err(why),
            (overview, python) => Ok([overview, python].into_iter().flatten().collect::<Vec<_>>().join("\n")),
        };
        let _ = reports.send(Report::Opened(pid, session, text));
    });
}

/// Draws `state`: the title, the jobs (or one job, or an opened capture), the status and
/// the keys.
pub fn draw(frame: &mut Frame, state: &TopState) {
    let [head, body, status, help] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(3), Constraint::Length(1), Constraint::Length(1)])
            .areas(frame.area());
    let sorted = format!("  ·  sorted by {}{}", state.sort.label(), if state.reversed { ", reversed" } else { "" });
    frame.render_widget(Paragraph::new(format!("{}{sorted}", title(&state.snapshot))), head);
    match &state.mode {
        Mode::List => draw_jobs(frame, body, state),
        Mode::Follow(pid) => draw_job(frame, body, state, *pid),
        Mode::Opened { title, lines, scroll } => {
            let text: Vec<Line> = lines.iter().skip(*scroll).map(|l| Line::raw(l.as_str())).collect();
            let block = Block::default().borders(Borders::TOP).title(format!(" {title} "));
            frame.render_widget(Paragraph::new(text).block(block), body);
        }
    }
    frame.render_widget(Paragraph::new(state.status.as_str()).style(Style::new().add_modifier(Modifier::BOLD)), status);
    frame.render_widget(Paragraph::new(HELP).style(Style::new().add_modifier(Modifier::DIM)), help);
}

/// The table of every job, the selected one highlighted.
fn draw_jobs(frame: &mut Frame, area: Rect, state: &TopState) {
    let jobs = state.jobs();
    let header =
        Row::new(HEADERS.iter().map(|h| if *h == state.sort.label() { format!("{h}▾") } else { h.to_string() }))
            .style(Style::new().add_modifier(Modifier::REVERSED));
    let rows = jobs.iter().map(|job| {
        let mut cells = cells(job);
        if state.is_capturing(job.pid) {
            cells[10] = format!("[capturing] {}", cells[10]);
        }
        Row::new(cells)
    });
    let mut widths: Vec<Constraint> = WIDTHS.iter().map(|(w, _)| Constraint::Length(*w as u16)).collect();
    widths.push(Constraint::Min(10));
    let table = Table::new(rows, widths)
        .header(header)
        .row_highlight_style(Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED));
    let mut selection =
        TableState::default().with_selected(state.selected.and_then(|pid| jobs.iter().position(|j| j.pid == pid)));
    frame.render_stateful_widget(table, area, &mut selection);
}

/// One job in detail: who it is, its CPU over the last refreshes, its probed step
/// times, the Python frames it runs most.
fn draw_job(frame: &mut Frame, area: Rect, state: &TopState, pid: u32) {
    let Some(job) = state.job(pid) else { return };
    let [facts, cpu, steps, frames] =
        Layout::vertical([Constraint::Length(8), Constraint::Length(4), Constraint::Length(4), Constraint::Min(2)])
            .areas(area);
    let mut lines = vec![
        Line::raw(format!(
            "{} (pid {}) · {} · {}",
            job.name,
            job.pid,
            job.framework.as_deref().unwrap_or("python"),
            job.user
        )),
        Line::raw(format!("command: {}", job.command)),
        Line::raw(format!(
            "{} process(es) · {} threads · CPU {:.1}% · memory {}",
            job.pids.len(),
            job.threads,
            job.cpu_percent,
            human::bytes(job.rss_bytes as f64)
        )),
    ];
    let mut placed = vec![format!("cgroup {}", job.cgroup)];
    placed.extend(job.slurm_job_id.as_ref().map(|id| format!("Slurm job {id}")));
    placed.extend(job.kubernetes_pod.as_ref().map(|pod| format!("pod {pod}")));
    if let Some(run) = &job.run {
        placed.push(format!("started by mlprof run (pid {}) into {}", run.run_pid, run.logdir.display()));
    }
    lines.push(Line::raw(placed.join(" · ")));
    if job.uses_gpu {
        let busy = job.gpu_busy_percent.map_or_else(String::new, |b| format!(" · {b:.0}% busy"));
        let memory = job.gpu_memory_bytes.map_or_else(String::new, |m| format!(" · {}", human::bytes(m as f64)));
        lines.push(Line::raw(format!("GPU {:?}{busy}{memory}", job.gpus)));
    }
    let probe = match (&job.probe, &job.probe_note) {
        (Some(p), _) if p.steps > 0 => format!(
            "last probe: {} steps of {}, {:.0}% waiting for input, top op {}",
            p.steps,
            human::duration_ms(p.step_time_ms),
            p.input_percent,
            p.top_op.as_deref().unwrap_or("—")
        ),
        (_, Some(note)) => format!("probe: {note}"),
        _ => "no probe yet".to_string(),
    };
    lines.push(Line::raw(probe));
    if let Some(p) = job.probe.as_ref().filter(|p| p.steps > 0) {
        let parts: Vec<String> = p
            .breakdown_ms
            .iter()
            .filter(|(_, ms)| *ms > 0.0)
            .map(|(category, ms)| format!("{category} {}", human::duration_ms(*ms)))
            .collect();
        if !parts.is_empty() {
            lines.push(Line::raw(format!("per step: {}", parts.join(" · "))));
        }
    }
    if let Some(session) = state.last_capture(pid) {
        lines.push(Line::raw(format!("last capture: {} (o opens it)", session.display())));
    }
    frame.render_widget(Paragraph::new(lines).block(Block::default().borders(Borders::TOP).title(" job ")), facts);
    let readings: Vec<u64> = state.cpu_history(pid).iter().map(|c| c.round() as u64).collect();
    let cpu_title = format!(" CPU, % of a core, last {} s ", readings.len());
    frame.render_widget(
        Sparkline::default().block(Block::default().borders(Borders::TOP).title(cpu_title)).data(&readings),
        cpu,
    );
    let step_times: Vec<u64> = job.step_history_ms.iter().map(|ms| (ms * 1000.0).round() as u64).collect();
    let trend = job.step_trend_percent.map_or_else(String::new, |t| format!(", trend {t:+.0}%"));
    let steps_title = format!(" step time of the last {} probes{trend} ", step_times.len());
    frame.render_widget(
        Sparkline::default().block(Block::default().borders(Borders::TOP).title(steps_title)).data(&step_times),
        steps,
    );
    let top: Vec<Line> = job.top_frames.iter().map(|f| Line::raw(format!("{:5.1}%  {}", f.percent, f.frame))).collect();
    let block = Block::default().borders(Borders::TOP).title(format!(" Python frames, {} samples ", job.samples));
    frame.render_widget(Paragraph::new(top).block(block), frames);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn screen(state: &TopState) -> String {
        let mut terminal = Terminal::new(TestBackend::new(150, 30)).expect("a test terminal");
        terminal.draw(|frame| draw(frame, state)).expect("drawn");
        let buffer = terminal.backend().buffer().clone();
        (0..buffer.area.height)
            .map(|y| (0..buffer.area.width).map(|x| buffer[(x, y)].symbol()).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_list_the_followed_job_and_an_opened_capture() {
        let mut state = TopState::default();
        let job = crate::JobView::example();
        state.update(Snapshot { jobs: vec![job.clone()], ..Snapshot::default() });
        let list = screen(&state);
        assert!(list.contains("CPU%▾"), "{list}");
        assert!(list.contains("4242") && list.contains("9.62 ms") && list.contains("42% step (train.py:10)"), "{list}");
        assert!(list.contains("q quit"), "{list}");
        state.key(Key::Char('f'), 10);
        let followed = screen(&state);
        assert!(followed.contains("command: python train.py"), "{followed}");
        assert!(followed.contains("last probe: 104 steps of 9.62 ms"), "{followed}");
        assert!(followed.contains("trend +40%"), "{followed}");
        assert!(followed.contains("per step: Input 1.2 ms · Host compute 8.43 ms"), "{followed}");
        state.opened(4242, "/d/s".into(), Ok("Overview\nSteps: 104".into()));
        let opened = screen(&state);
        assert!(opened.contains("pid 4242: /d/s") && opened.contains("Steps: 104"), "{opened}");
    }
}

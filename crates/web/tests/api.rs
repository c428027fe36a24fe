//! The HTTP API end to end on real fixtures, through a server on an ephemeral port:
//! the runs listing, every tool's result against the same analysis computed in-process
//! (what `mlprof analyze --format json` prints), the CSV export, error statuses and
//! messages, path traversal and symbolic links out of the root, security headers and
//! compression.

use std::io::Read;
use std::path::{Path, PathBuf};

use mlprof_analysis::report::Report;
use mlprof_analysis::tool::{Analysis, BREAKDOWN, Options, ToolId};
use mlprof_model::{Host, Session};
use mlprof_web::testing::{HttpResponse, TestServer};
use serde_json::{Value, json};

fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(relative)
}

const TF_LOGDIR: &str = "xspace/tf_keras2_input_bound/logdir";
const JAX_LOGDIR: &str = "xspace/jax_profile/logdir";
const KINETO_RANKS: &str = "kineto/hta/timeline_analysis";

struct Fixture {
    server: TestServer,
    _cache: tempfile::TempDir,
}

fn serve(path: &Path) -> Fixture {
    let cache = tempfile::tempdir().expect("temp dir");
    let server = TestServer::start(path, cache.path()).expect("server starts");
    Fixture { server, _cache: cache }
}

impl Fixture {
    fn get(&self, target: &str) -> HttpResponse {
        self.server.get(target, &[]).expect("request answered")
    }

    fn json(&self, target: &str) -> Value {
        let response = self.get(target);
        assert_eq!(response.status, 200, "{target}: {}", response.text());
        response.json().expect("JSON body")
    }

    /// The status and `error` message of a failing request.
    fn error(&self, target: &str) -> (u16, String) {
        let response = self.get(target);
        assert_eq!(response.header("content-type"), Some("application/json"), "{target}");
        let body = response.json().expect("JSON error body");
        let message = body["error"].as_str().expect("an error message").to_string();
        assert!(!message.contains('\n'), "{message}");
        (response.status, message)
    }

    fn only_run(&self) -> String {
        let runs = self.json("/api/runs");
        runs["runs"][0]["name"].as_str().expect("a run").to_string()
    }
}

/// `value` after a trip through JSON text, so floats compare as the client reads them.
fn as_read(value: &impl serde::Serialize) -> Value {
    serde_json::from_str(&serde_json::to_string(value).expect("serializes")).expect("parses")
}

fn load_session(path: &Path) -> Session {
    mlprof_formats::discover::load(path).expect("fixture loads").pop().expect("one session")
}

/// What `mlprof analyze --tool TOOL --format json` computes: (report, result).
fn expected(session: &Session, tool: &str) -> (Report, Value) {
    let hosts: Vec<&Host> = session.hosts.iter().collect();
    match tool {
        "gpu" => {
            let result = mlprof_analysis::gpu::analyze(&hosts, &[]);
            (result.report(), as_read(&result))
        }
        "transfers" => {
            let result = mlprof_analysis::gpu::transfers::analyze(&hosts, Default::default());
            (result.report(), as_read(&result))
        }
        _ => {
            let tool = ToolId::from_name(tool).expect("a known tool");
            let result = Analysis::new(hosts, Options::default()).run(tool).expect("the tool runs");
            (result.report(), as_read(&result))
        }
    }
}

fn query(run: &str) -> String {
    run.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }
        })
        .collect()
}

#[test]
fn runs_are_listed_and_a_read_run_lists_exactly_its_tools() {
    let fixture = serve(&data(TF_LOGDIR));
    let runs = fixture.json("/api/runs");
    assert_eq!(runs["root"], json!(data(TF_LOGDIR).display().to_string()));
    assert_eq!(
        runs["runs"],
        json!([{"name": "2026_11_21_19_24_08", "format": "xspace", "hosts": ["vm"],
                "tools": ["overview_page", "input_pipeline_analyzer", "framework_op_stats", "kernel_stats",
                          "memory_profile", "pod_viewer", "tf_data_bottleneck_analysis", "transfers", "steps",
                          "python", "trace_viewer"],
                "tools_exact": false}])
    );
    let exact = json!({"name": "2026_11_21_19_24_08", "format": "xspace", "hosts": ["vm"],
        "tools": ["overview_page", "input_pipeline_analyzer", "framework_op_stats", "memory_profile", "pod_viewer",
                  "tf_data_bottleneck_analysis", "steps", "trace_viewer"],
        "tools_exact": true});
    assert_eq!(fixture.json("/api/run?run=2026_11_21_19_24_08"), exact);
    assert_eq!(fixture.json("/api/runs")["runs"][0], exact);
}

#[test]
fn runs_are_newest_first_across_tensorboard_runs() {
    let root = tempfile::tempdir().expect("temp dir");
    let profile = data(TF_LOGDIR).join("plugins/profile/2026_11_21_19_24_08/vm.xplane.pb");
    for session in ["train/plugins/profile/2026_01_01_00_00_00", "eval/plugins/profile/2026_02_01_00_00_00"] {
        let dir = root.path().join(session);
        std::fs::create_dir_all(&dir).expect("session dir");
        std::fs::copy(&profile, dir.join("vm.xplane.pb")).expect("copied");
    }
    let fixture = serve(root.path());
    let runs = fixture.json("/api/runs");
    let names: Vec<&str> = runs["runs"].as_array().expect("runs").iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["eval/2026_02_01_00_00_00", "train/2026_01_01_00_00_00"]);
}

/// Every tool with data, on each kind of fixture: the report and result equal the
/// in-process analysis, and the CSV equals the report's main table as the CLI writes it.
#[test]
fn tool_results_and_csv_equal_the_analysis() {
    for (fixture_path, expected_tools) in [(TF_LOGDIR, 7), (JAX_LOGDIR, 5), (KINETO_RANKS, 8)] {
        let fixture = serve(&data(fixture_path));
        let session = load_session(&data(fixture_path));
        let run = fixture.only_run();
        let entry = fixture.json(&format!("/api/run?run={}", query(&run)));
        let tools: Vec<&str> = entry["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
        let tools: Vec<&str> = tools.into_iter().filter(|t| *t != "trace_viewer").collect();
        assert_eq!(tools.len(), expected_tools, "{fixture_path}: {tools:?}");
        let hosts: Vec<&str> = session.hosts.iter().map(|h| h.name.as_str()).collect();
        for tool in tools {
            let (report, result) = expected(&session, tool);
            let answer = fixture.json(&format!("/api/tool?run={}&tool={tool}&host=all", query(&run)));
            assert_eq!(answer["run"], json!(run), "{fixture_path} {tool}");
            assert_eq!(answer["hosts"], json!(hosts), "{fixture_path} {tool}");
            assert_eq!(answer["tool"], json!(tool));
            assert!(answer["result"] == result, "{fixture_path} {tool}: result differs from the analysis");
            assert!(answer["report"] == as_read(&report), "{fixture_path} {tool}: report differs");
            let csv = fixture.get(&format!("/api/csv?run={}&tool={tool}", query(&run)));
            match report.to_csv() {
                Some(want) => {
                    assert_eq!(csv.status, 200, "{fixture_path} {tool}: {}", csv.text());
                    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
                    let disposition = format!("attachment; filename=\"{tool}.csv\"");
                    assert_eq!(csv.header("content-disposition"), Some(disposition.as_str()));
                    assert!(csv.text() == want, "{fixture_path} {tool}: CSV differs");
                }
                None => assert_eq!(csv.status, 404, "{fixture_path} {tool}"),
            }
        }
    }
}

#[test]
fn options_change_the_result_as_the_cli_options_do() {
    let fixture = serve(&data(KINETO_RANKS));
    let session = load_session(&data(KINETO_RANKS));
    let hosts: Vec<&Host> = session.hosts.iter().collect();
    let options = mlprof_analysis::gpu::transfers::TransfersOptions { gap_threshold_ps: 1_000_000_000 };
    let want = as_read(&mlprof_analysis::gpu::transfers::analyze(&hosts, options));
    let answer = fixture.json("/api/tool?run=timeline_analysis&tool=transfers&gap_threshold=1ms");
    assert!(answer["result"] == want, "gap_threshold=1ms differs from the analysis");
    assert_eq!(answer["result"]["gap_threshold_ps"], json!(1_000_000_000));

    let mut xprof = Options::default();
    xprof.set(&BREAKDOWN, "xprof", "breakdown").expect("a breakdown");
    let want = as_read(&Analysis::new(hosts, xprof).run(ToolId::OverviewPage).expect("the tool runs"));
    let answer = fixture.json("/api/tool?run=timeline_analysis&tool=overview_page&breakdown=xprof");
    assert!(answer["result"] == want, "breakdown=xprof differs from the analysis");

    let session_tf = load_session(&data(TF_LOGDIR));
    let mut report = expected(&session_tf, "framework_op_stats").0;
    report.sort_main_table("total_self_time:asc").expect("column exists");
    let fixture = serve(&data(TF_LOGDIR));
    let csv = fixture.get("/api/csv?run=2026_11_21_19_24_08&tool=framework_op_stats&sort=total_self_time:asc");
    assert!(csv.text() == report.to_csv().expect("main table"), "sorted CSV differs");
}

#[test]
fn bad_requests_answer_the_documented_status_and_one_line() {
    let fixture = serve(&data(TF_LOGDIR));
    let run = "run=2026_11_21_19_24_08";
    let cases: Vec<(String, u16, &str)> = vec![
        ("/api/tool?tool=overview_page".into(), 400, "missing parameter run"),
        (format!("/api/tool?{run}"), 400, "missing parameter tool"),
        ("/api/tool?run=nope&tool=overview_page".into(), 404, "no run named \"nope\"; runs: 2026_11_21_19_24_08"),
        (
            format!("/api/tool?{run}&tool=overview_page&host=h2"),
            404,
            "no host named \"h2\" in run 2026_11_21_19_24_08; hosts: vm",
        ),
        (format!("/api/tool?{run}&tool=op_profile"), 404, "no tool named \"op_profile\"; tools: overview_page,"),
        (format!("/api/tool?{run}&tool=trace_viewer"), 400, "trace_viewer has no report"),
        (
            format!("/api/tool?{run}&tool=overview_page&breakdown=fast"),
            400,
            "breakdown \"fast\": expected classic or xprof",
        ),
        (format!("/api/tool?{run}&tool=overview_page&gap_threshold=1ms"), 400, "gap_threshold is for tool=transfers"),
        (format!("/api/tool?{run}&tool=transfers&gap_threshold=soon"), 400, "gap_threshold: "),
        (format!("/api/tool?{run}&tool=overview_page&sort=x"), 400, "sort is for /api/csv"),
        (format!("/api/csv?{run}&tool=framework_op_stats&sort=nope"), 400, "no column \"nope\"; columns: Rank,"),
        ("/api/run".into(), 400, "missing parameter run"),
        ("/api/run?run=nope".into(), 404, "no run named \"nope\""),
        ("/api/nothing".into(), 404, "no such page or endpoint: /api/nothing"),
        ("/static/missing.js".into(), 404, "no file static/missing.js"),
    ];
    for (target, status, message) in cases {
        let (got_status, got_message) = fixture.error(&target);
        assert_eq!(got_status, status, "{target}: {got_message}");
        assert!(got_message.starts_with(message), "{target}: {got_message:?} should start with {message:?}");
    }
    // A browser at an unknown page gets a page that says so and links to the viewer.
    let page = fixture.server.get("/nope'x", &[("Accept", "text/html,application/xhtml+xml")]).expect("answered");
    assert_eq!(page.status, 404);
    assert!(
        page.header("content-type").is_some_and(|t| t.starts_with("text/html")),
        "{:?}",
        page.header("content-type")
    );
    let text = page.text();
    assert!(text.contains("<h1>No page at /nope&#39;x</h1>") && text.contains("<a href=\"/\">/</a>"), "{text}");
    let api = fixture.server.get("/api/nope", &[("Accept", "text/html")]).expect("answered");
    assert_eq!(api.status, 404);
    assert!(api.text().contains("no such page or endpoint"), "the API answers JSON whatever is accepted");
}

#[test]
fn the_tools_and_their_options_are_described_and_checked_by_the_server() {
    let fixture = serve(&data(TF_LOGDIR));
    let tools = fixture.json("/api/tools");
    let tools = tools["tools"].as_array().expect("a tool list");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    let served: Vec<&str> = ToolId::ALL.into_iter().filter(|t| t.spec().served).map(ToolId::name).collect();
    assert_eq!(names, served, "every served tool, in the selector's order");
    assert!(!names.contains(&"tfprof"), "a CLI-only tool is not offered");
    let transfers = tools.iter().find(|t| t["name"] == "transfers").expect("transfers is served");
    assert_eq!(transfers["label"], "Transfers and synchronisation");
    assert_eq!(transfers["options"][0]["key"], "gap_threshold");
    assert_eq!(transfers["options"][0]["default"], "100us");
    assert_eq!(transfers["options"][0]["kind"]["type"], "duration");
    let overview = tools.iter().find(|t| t["name"] == "overview_page").expect("the overview is served");
    assert_eq!(overview["options"][0]["kind"]["choices"][1]["value"], "xprof");
    assert_eq!(overview["options"][0]["sources"], json!(["xspace"]));
    let trace = tools.iter().find(|t| t["name"] == "trace_viewer").expect("the trace viewer is served");
    assert_eq!(trace["outputs"], json!(["page"]));

    // Checked as /api/tool checks them, the problem in a 200 answer.
    let good = fixture.json("/api/options?tool=transfers&gap_threshold=1ms");
    assert_eq!((good["problem"].clone(), good["options"].clone()), (Value::Null, json!({"gap_threshold": "1ms"})));
    let bad = fixture.json("/api/options?tool=transfers&gap_threshold=soon");
    let problem = bad["problem"].as_str().expect("a problem");
    assert!(problem.starts_with("gap_threshold: ") && problem.contains("\"soon\" is not a duration"), "{problem}");
    let (status, message) = fixture.error("/api/tool?run=2026_11_21_19_24_08&tool=transfers&gap_threshold=soon");
    assert_eq!((status, message.as_str()), (400, problem), "/api/tool refuses it with the same sentence");
    let elsewhere = fixture.json("/api/options?tool=overview_page&gap_threshold=1ms");
    assert_eq!(elsewhere["problem"], "gap_threshold is for tool=transfers");
    assert_eq!(fixture.error("/api/options?tool=nope").0, 404);
    assert_eq!(fixture.error("/api/options").0, 400);
}

#[test]
fn a_profile_that_fails_to_load_is_a_500_naming_the_file() {
    let root = tempfile::tempdir().expect("temp dir");
    let session = root.path().join("plugins/profile/2026_01_01_00_00_00");
    std::fs::create_dir_all(&session).expect("session dir");
    std::fs::write(session.join("vm.xplane.pb"), b"\x0a\xff\xff\xff\xff\x0f").expect("written");
    let fixture = serve(root.path());
    let (status, message) = fixture.error("/api/tool?run=2026_01_01_00_00_00&tool=overview_page");
    assert_eq!(status, 500, "{message}");
    assert!(message.contains("vm.xplane.pb"), "{message}");
}

#[test]
fn only_the_embedded_files_are_served() {
    let fixture = serve(&data(TF_LOGDIR));
    let index = fixture.get("/");
    assert_eq!(index.status, 200);
    assert_eq!(index.header("content-type"), Some("text/html; charset=utf-8"));
    let on_disk = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("web/index.html")).expect("index.html");
    assert_eq!(index.body, on_disk);

    let script = fixture.get("/static/app.js");
    assert_eq!(script.status, 200);
    assert_eq!(script.header("content-type"), Some("text/javascript; charset=utf-8"));
    let etag = script.header("etag").expect("an ETag").to_string();
    assert_eq!(script.header("cache-control"), Some("no-cache"));
    let revalidated = fixture.server.get("/static/app.js", &[("If-None-Match", &etag)]).expect("answered");
    assert_eq!(revalidated.status, 304);
    assert!(revalidated.body.is_empty());

    for target in [
        "/static/../Cargo.toml",
        "/static/%2e%2e/Cargo.toml",
        "/static/%2E%2E%2FCargo.toml",
        "/static/..%5cCargo.toml",
        "/static/app.js/../../Cargo.toml",
        "/static//etc/passwd",
        "/static/%2fetc%2fpasswd",
        "/static/.hidden",
        "/../Cargo.toml",
        "/static/../../tests/data/xspace/tf_keras2_input_bound/logdir/plugins/profile/2026_11_21_19_24_08/vm.xplane.pb",
    ] {
        let response = fixture.get(target);
        assert!(response.status == 404 || response.status == 400, "{target}: {}", response.status);
        let text = response.text();
        assert!(!text.contains("[package]") && !text.contains("root:"), "{target}: {text}");
    }
}

#[test]
fn every_response_carries_the_security_headers() {
    let fixture = serve(&data(TF_LOGDIR));
    for target in ["/", "/static/app.js", "/api/runs", "/api/nothing", "/api/tool?run=x&tool=y"] {
        let response = fixture.get(target);
        let policy = response.header("content-security-policy").unwrap_or_default();
        assert!(policy.starts_with("default-src 'self';"), "{target}: {policy}");
        assert!(!policy.contains("http"), "{target}: the policy names another origin: {policy}");
        assert_eq!(response.header("x-content-type-options"), Some("nosniff"), "{target}");
        assert_eq!(response.header("x-frame-options"), Some("DENY"), "{target}");
    }
}

#[test]
fn large_answers_are_streamed_and_compressed_when_the_client_accepts_it() {
    let fixture = serve(&data(TF_LOGDIR));
    let target = "/api/tool?run=2026_11_21_19_24_08&tool=framework_op_stats";
    let plain = fixture.get(target);
    assert_eq!(plain.header("content-encoding"), None);
    // Streamed as it is serialised: no length known up front.
    assert_eq!(plain.header("transfer-encoding"), Some("chunked"));
    assert_eq!(plain.header("content-length"), None);
    let gzipped = fixture.server.get(target, &[("Accept-Encoding", "gzip")]).expect("answered");
    assert_eq!(gzipped.header("content-encoding"), Some("gzip"));
    assert!(gzipped.body.len() * 4 < plain.body.len(), "{} vs {} bytes", gzipped.body.len(), plain.body.len());
    let mut inflated = Vec::new();
    flate2::read::GzDecoder::new(gzipped.body.as_slice()).read_to_end(&mut inflated).expect("valid gzip");
    assert!(inflated == plain.body, "the gzipped answer inflates to another body");
    let brotli = fixture.server.get(target, &[("Accept-Encoding", "br")]).expect("answered");
    assert_eq!(brotli.header("content-encoding"), Some("br"));
}

/// A TensorBoard log directory that links a session in from elsewhere: discovery
/// does not walk out of the root (a directory link) and the server refuses a file
/// link that leads out.
#[cfg(unix)]
#[test]
fn profiles_reached_through_links_out_of_the_root_are_refused() {
    use std::os::unix::fs::symlink;
    let outside = data(TF_LOGDIR).join("plugins/profile/2026_11_21_19_24_08");
    let root = tempfile::tempdir().expect("temp dir");
    let profile = root.path().join("plugins/profile");
    std::fs::create_dir_all(profile.join("2026_01_01_00_00_00")).expect("session dir");
    std::fs::copy(outside.join("vm.xplane.pb"), profile.join("2026_01_01_00_00_00/vm.xplane.pb")).expect("copied");
    symlink(&outside, profile.join("2026_02_02_00_00_00")).expect("directory link");
    std::fs::create_dir_all(profile.join("2026_03_03_00_00_00")).expect("session dir");
    symlink(outside.join("vm.xplane.pb"), profile.join("2026_03_03_00_00_00/vm.xplane.pb")).expect("file link");

    let fixture = serve(root.path());
    let names: Vec<String> = fixture.json("/api/runs")["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(names, ["2026_01_01_00_00_00"]);
    // The file link is refused; the directory link is not even walked into.
    assert_eq!(fixture.server.state().catalog().refused().len(), 1);
    let skipped = fixture.server.state().catalog().skipped().to_vec();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(skipped[0].path.ends_with("2026_02_02_00_00_00") && skipped[0].reason.contains("outside"), "{skipped:?}");
    let (status, _) = fixture.error("/api/tool?run=2026_02_02_00_00_00&tool=overview_page");
    assert_eq!(status, 404);

    let only_outside = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(only_outside.path().join("plugins/profile")).expect("profile dir");
    symlink(&outside, only_outside.path().join("plugins/profile/2026_02_02_00_00_00")).expect("directory link");
    let cache = tempfile::tempdir().expect("temp dir");
    let error = TestServer::start(only_outside.path(), cache.path()).err().expect("nothing to serve");
    assert!(error.to_string().contains("no profile found") && error.to_string().contains(", outside "), "{error}");
}

/// DNS rebinding: another site's name pointed at 127.0.0.1 must not read the profiles.
#[test]
fn requests_for_another_host_name_are_refused() {
    let fixture = serve(&data(TF_LOGDIR));
    let refused = fixture.server.get("/api/runs", &[("Host", "evil.example:6006")]).expect("answered");
    assert_eq!(refused.status, 403);
    let message = refused.json().expect("JSON")["error"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("evil.example"), "{message}");
    assert!(refused.header("content-security-policy").is_some());
    let local = fixture.server.get("/api/runs", &[("Host", "localhost:6006")]).expect("answered");
    assert_eq!(local.status, 200);
}

/// Another site's page reading the API through the user's browser is refused; the page
/// itself still opens from a link on another site.
#[test]
fn api_requests_marked_cross_site_are_refused() {
    let fixture = serve(&data(TF_LOGDIR));
    let refused = fixture.server.get("/api/runs", &[("Sec-Fetch-Site", "cross-site")]).expect("answered");
    assert_eq!(refused.status, 403);
    let message = refused.json().expect("JSON")["error"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("Sec-Fetch-Site: cross-site") && !message.contains('\n'), "{message}");
    for allowed in ["same-origin", "none"] {
        let answered = fixture.server.get("/api/runs", &[("Sec-Fetch-Site", allowed)]).expect("answered");
        assert_eq!(answered.status, 200, "{allowed}");
    }
    let page = fixture.server.get("/", &[("Sec-Fetch-Site", "cross-site")]).expect("answered");
    assert_eq!(page.status, 200);
}

/// The run names `/api/runs` lists.
fn run_names(fixture: &Fixture) -> Vec<String> {
    fixture.json("/api/runs")["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect()
}

/// Asks `/api/runs` until it lists `expected` (a scan may outlast one request's wait
/// on a busy machine), and fails with the last listing after 20 s.
fn wait_for_runs(fixture: &Fixture, expected: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let names = run_names(fixture);
        if names == expected {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "runs are {names:?}, not {expected:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A log directory that grows while the server runs (training writes a new session):
/// `/api/runs` discovers it again — new runs appear, removed ones disappear, links out
/// of the root are still refused, and a loaded run stays loaded unless its files
/// change.
#[cfg(unix)]
#[test]
fn a_live_log_directory_is_discovered_again() {
    let xplane = data(JAX_LOGDIR).join("plugins/profile/2026_11_21_19_24_59/vm.xplane.pb");
    let root = tempfile::tempdir().expect("temp dir");
    let outside = tempfile::tempdir().expect("temp dir");
    let profile = root.path().join("plugins/profile");
    let add_session = |name: &str, host: &str| {
        std::fs::create_dir_all(profile.join(name)).expect("session dir");
        std::fs::copy(&xplane, profile.join(name).join(format!("{host}.xplane.pb"))).expect("copied");
    };
    add_session("2026_01_01_00_00_00", "vm");
    std::fs::copy(&xplane, outside.path().join("vm.xplane.pb")).expect("copied");

    let cache = tempfile::tempdir().expect("temp dir");
    let server = TestServer::start_with(root.path(), cache.path(), |config| {
        config.rescan_interval = std::time::Duration::ZERO;
    })
    .expect("server starts");
    let fixture = Fixture { server, _cache: cache };
    assert_eq!(run_names(&fixture), ["2026_01_01_00_00_00"]);
    fixture.json("/api/run?run=2026_01_01_00_00_00");
    assert_eq!(fixture.server.state().loaded_runs(), ["2026_01_01_00_00_00"]);

    add_session("2026_02_02_00_00_00", "vm");
    wait_for_runs(&fixture, &["2026_02_02_00_00_00", "2026_01_01_00_00_00"]);
    assert_eq!(fixture.server.state().loaded_runs(), ["2026_01_01_00_00_00"], "an unchanged run stays loaded");
    assert_eq!(fixture.json("/api/run?run=2026_02_02_00_00_00")["hosts"], json!(["vm"]));

    std::os::unix::fs::symlink(outside.path(), profile.join("2026_03_03_00_00_00")).expect("directory link");
    std::fs::remove_dir_all(profile.join("2026_02_02_00_00_00")).expect("removed");
    wait_for_runs(&fixture, &["2026_01_01_00_00_00"]);
    assert_eq!(fixture.server.state().catalog().skipped().len(), 1, "the link out of the root is skipped");
    let (status, _) = fixture.error("/api/tool?run=2026_02_02_00_00_00&tool=overview_page");
    assert_eq!(status, 404, "a removed run is gone");

    // A second host in the loaded run: its files changed, so its session is dropped.
    add_session("2026_01_01_00_00_00", "vm2");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while fixture.json("/api/runs")["runs"][0]["hosts"] != json!(["vm", "vm2"]) {
        assert!(std::time::Instant::now() < deadline, "the new host is listed");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(fixture.server.state().loaded_runs().is_empty(), "a changed run is read again");
}

/// With the default interval, runs are not discovered again on every request.
#[test]
fn runs_are_discovered_again_at_most_once_per_interval() {
    let xplane = data(JAX_LOGDIR).join("plugins/profile/2026_11_21_19_24_59/vm.xplane.pb");
    let root = tempfile::tempdir().expect("temp dir");
    let profile = root.path().join("plugins/profile");
    for name in ["2026_01_01_00_00_00", "2026_02_02_00_00_00"] {
        std::fs::create_dir_all(profile.join(name)).expect("session dir");
        if name.starts_with("2026_01") {
            std::fs::copy(&xplane, profile.join(name).join("vm.xplane.pb")).expect("copied");
        }
    }
    let cache = tempfile::tempdir().expect("temp dir");
    let server = TestServer::start_with(root.path(), cache.path(), |config| {
        config.rescan_interval = std::time::Duration::from_secs(3600);
    })
    .expect("server starts");
    let fixture = Fixture { server, _cache: cache };
    std::fs::copy(&xplane, profile.join("2026_02_02_00_00_00/vm.xplane.pb")).expect("copied");
    assert_eq!(run_names(&fixture), ["2026_01_01_00_00_00"], "the next scan is an hour away");
}

/// The files under `dir` (any depth) whose name satisfies `wanted`.
fn files_under(dir: &Path, wanted: &dyn Fn(&str) -> bool, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, wanted, out);
        } else if path.file_name().and_then(|n| n.to_str()).is_some_and(wanted) {
            out.push(path);
        }
    }
}

#[test]
fn serving_the_fixture_directory_lists_every_profile_at_any_depth() {
    let root = data("");
    let fixture = serve(&root);
    let runs = fixture.json("/api/runs");
    let names: Vec<&str> = runs["runs"].as_array().expect("runs").iter().filter_map(|r| r["name"].as_str()).collect();
    let relative = |dir: &Path| dir.strip_prefix(&root).expect("under the root").to_string_lossy().into_owned();
    let mut expected = Vec::new();
    // Every XSpace session (TensorBoard's plugins/profile/<session>/<host>.xplane.pb).
    let mut xplanes = Vec::new();
    files_under(&root, &|name| name.ends_with(".xplane.pb"), &mut xplanes);
    // A session is named as TensorBoard names it: the run's folder, then the session.
    expected.extend(
        xplanes.iter().filter_map(|file| file.parent()).map(|dir| relative(dir).replace("/plugins/profile", "")),
    );
    // Every folder of Kineto traces HTA's tests use, one run per folder (rank files inside).
    let mut traces = Vec::new();
    files_under(&data("kineto/hta"), &|name| name.ends_with(".json.gz") || name.ends_with(".json"), &mut traces);
    // (MANIFEST.json beside them lists where they came from.)
    expected
        .extend(traces.iter().filter_map(|file| file.parent()).filter(|dir| *dir != data("kineto/hta")).map(&relative));
    expected.sort();
    expected.dedup();
    assert!(expected.len() > 30, "{expected:?}");
    let missing: Vec<&String> =
        expected.iter().filter(|dir| !names.iter().any(|name| name.ends_with(dir.as_str()))).collect();
    assert!(missing.is_empty(), "not listed: {missing:?}\nlisted: {names:?}");
    // HTA's own layout, served from its folder: one run per folder of rank files.
    let hta = serve(&data("kineto/hta")).json("/api/runs");
    assert!(hta["runs"].as_array().expect("runs").len() >= 20, "{hta}");
}

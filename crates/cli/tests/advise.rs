//! `mlprof advise` end to end on the real fixtures: the input-bound Keras profile gets
//! the tf.data advice naming its `MapAndBatch` bottleneck, the pipelined one is not
//! called input-bound, a PyTorch GPU trace gets transfer and device-idle advice backed
//! by the transfers and gpu tools, the memory rule reads the PyTorch CPU profile, and
//! every number a finding or check cites equals the number at that path in the cited
//! tool's own `mlprof analyze --format json` result.

use serde_json::Value;

mod common;

use common::{data_str as data, mlprof, ok_stdout};

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok_stdout(mlprof(args))).expect("JSON output")
}

/// A GPU tool's JSON, or null where the profile has no GPU activity (exit 1).
fn gpu_json(args: &[&str]) -> Value {
    let out = mlprof(args);
    if out.status.code() == Some(1) {
        assert!(String::from_utf8_lossy(&out.stderr).contains("no GPU activity"), "{args:?}");
        return Value::Null;
    }
    serde_json::from_str(&ok_stdout(out)).expect("JSON output")
}

fn advice(path: &str) -> Value {
    json(&["advise", path, "--format", "json"])
}

fn findings<'a>(advice: &'a Value, rule: &str) -> Vec<&'a Value> {
    advice["findings"].as_array().expect("findings").iter().filter(|f| f["rule"] == rule).collect()
}

fn check<'a>(advice: &'a Value, rule: &str) -> &'a Value {
    advice["checks"].as_array().expect("checks").iter().find(|c| c["rule"] == rule).expect("every rule is checked")
}

/// The tool results of `path`, by tool name, as `mlprof analyze --format json` gives
/// them.
struct ToolJson {
    xprof: Value,
    gpu: Value,
    transfers: Value,
}

impl ToolJson {
    fn of(path: &str) -> ToolJson {
        ToolJson {
            xprof: json(&["analyze", path, "--tool", "all", "--format", "json"]),
            gpu: gpu_json(&["analyze", path, "--tool", "gpu", "--format", "json"]),
            transfers: gpu_json(&["analyze", path, "--tool", "transfers", "--format", "json"]),
        }
    }

    fn tool(&self, name: &str) -> &Value {
        match name {
            "gpu" => &self.gpu,
            "transfers" => &self.transfers,
            // The overview's `steps` is the input-pipeline analysis the rules read.
            "input_pipeline_analyzer" => &self.xprof["tools"]["overview_page"]["steps"],
            other => &self.xprof["tools"][other],
        }
    }
}

/// The number at `path` in `root`: `a.b[2].c`, `category_ms["id"].average` (a list of
/// `[key, value]` pairs), `mean(…[].f)`, `sum(…[].f)`, `count(…[].flag)` over a list and
/// `count(…[])`, its length.
fn resolve(root: &Value, path: &str) -> f64 {
    for (name, aggregate) in [("mean(", 0), ("sum(", 1), ("count(", 2)] {
        if let Some(inner) = path.strip_prefix(name).and_then(|p| p.strip_suffix(')')) {
            if let Some(list) = inner.strip_suffix("[]") {
                return lookup(root, list).as_array().expect("a list").len() as f64;
            }
            let (list, field) = inner.split_once("[].").expect("aggregate over a list");
            let items = lookup(root, list).as_array().expect("a list").clone();
            let values: Vec<&Value> = items.iter().map(|item| lookup(item, field)).collect();
            return match aggregate {
                0 => values.iter().map(|v| v.as_f64().expect("number")).sum::<f64>() / values.len() as f64,
                1 => values.iter().map(|v| v.as_f64().expect("number")).sum(),
                _ => values.iter().filter(|v| v.as_bool().expect("bool")).count() as f64,
            };
        }
    }
    lookup(root, path).as_f64().unwrap_or_else(|| panic!("{path} is not a number"))
}

fn lookup<'a>(root: &'a Value, path: &str) -> &'a Value {
    let mut value = root;
    let mut rest = path;
    while !rest.is_empty() {
        rest = rest.strip_prefix('.').unwrap_or(rest);
        if let Some(after) = rest.strip_prefix("[\"") {
            let (key, tail) = after.split_once("\"]").expect("closing \"]");
            value = value
                .as_array()
                .and_then(|pairs| pairs.iter().find(|pair| pair[0] == key))
                .map(|pair| &pair[1])
                .unwrap_or_else(|| panic!("no key {key} in {path}"));
            rest = tail;
        } else if let Some(after) = rest.strip_prefix('[') {
            let (index, tail) = after.split_once(']').expect("closing ]");
            value = &value[index.parse::<usize>().expect("index")];
            rest = tail;
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            value = &value[&rest[..end]];
            rest = &rest[end..];
        }
    }
    value
}

/// Every cited number of every finding and check equals the tool's own; returns how
/// many were compared.
fn assert_citations_match(path: &str) -> usize {
    let advice = advice(path);
    let tools = ToolJson::of(path);
    let mut compared = 0;
    let findings = advice["findings"].as_array().expect("findings");
    let evidence = findings.iter().flat_map(|f| f["evidence"].as_array().expect("evidence"));
    let checks = advice["checks"].as_array().expect("checks").iter().filter(|c| c["status"] == "clear");
    let check_citations = checks.map(|c| (c["rule"].clone(), c));
    let mut cited: Vec<(String, &Value)> =
        evidence.map(|e| (e["tool"].as_str().expect("tool").to_string(), e)).collect();
    for (rule, check) in check_citations {
        // A clear check's numbers come from the tool its rule reads.
        let tool = match rule.as_str().expect("rule") {
            "input_bound" | "kernel_launch" | "host_overhead" | "op_placement" | "device_idle" | "communication"
            | "compilation" => "input_pipeline_analyzer",
            "low_precision" => "overview_page",
            "tensor_core" => "kernel_stats",
            "memory" => "memory_profile",
            _ => "transfers",
        };
        cited.push((tool.to_string(), check));
    }
    for (tool, item) in cited {
        for number in item["cited"].as_array().expect("cited") {
            let field = number["field"].as_str().expect("field");
            if field == "device memory_size" {
                continue;
            }
            let expected = resolve(tools.tool(&tool), field);
            assert_eq!(number["value"].as_f64(), Some(expected), "{path}: {tool} {field}");
            compared += 1;
        }
    }
    compared
}

#[test]
fn input_bound_keras_profile_gets_tf_data_advice_naming_map_and_batch() {
    let path = data("xspace/tf_keras2_input_bound");
    let advice = advice(&path);
    let tools = ToolJson::of(&path);
    let bottleneck = &tools.tool("tf_data_bottleneck_analysis")["bottlenecks"][0];
    assert_eq!(bottleneck["iterator_name"], "MapAndBatch", "what the tf.data tool reports");
    let input = findings(&advice, "input_bound");
    assert_eq!(input.len(), 1);
    let finding = input[0];
    assert_eq!(finding["rank"], 1, "the costliest problem of this profile");
    assert_eq!(finding["severity"], "high");
    assert!(finding["title"].as_str().expect("title").contains("MapAndBatch"), "{}", finding["title"]);
    let fixes: Vec<&str> = finding["fixes"].as_array().expect("fixes").iter().filter_map(Value::as_str).collect();
    assert!(fixes.iter().any(|f| f.contains("`MapAndBatch`") && f.contains("num_parallel_calls=tf.data.AUTOTUNE")));
    assert!(fixes.iter().any(|f| f.contains("tf.py_function")), "EagerPyFunc ops ran in the pipeline: {fixes:?}");
    assert!(fixes.iter().any(|f| f.contains(".cache()")));
    assert!(fixes.iter().any(|f| f.contains("max_intra_op_parallelism")));
    // The time lost is the breakdown's mean Input time, and its share XProf's input %.
    let steps = tools.tool("input_pipeline_analyzer");
    let input_ms = resolve(steps, "category_ms[\"infeedTimeMs\"].average");
    assert_eq!(finding["time_lost_per_step_ps"].as_i64(), Some((input_ms * 1e9).round() as i64));
    let share = finding["step_time_percent"].as_f64().expect("share");
    let xprof = steps["bottleneck"]["input_percent"].as_f64().expect("input %");
    assert!((share - xprof).abs() < 1e-6 * xprof, "{share} vs XProf's {xprof}");
    let tf_data =
        finding["evidence"].as_array().expect("evidence").iter().find(|e| e["tool"] == "tf_data_bottleneck_analysis");
    let tf_data = tf_data.expect("tf.data evidence");
    assert_eq!(tf_data["cited"][1]["value"].as_f64(), bottleneck["iterator_self_time_ps"].as_f64());
}

#[test]
fn pipelined_keras_profile_is_not_called_input_bound() {
    let path = data("xspace/tf_keras_pipelined");
    let advice = advice(&path);
    assert!(findings(&advice, "input_bound").is_empty(), "{advice:#}");
    let input = check(&advice, "input_bound");
    assert_eq!(input["status"], "clear");
    // XProf calls it moderately input-bound on the total; one slow step makes that.
    let detail = input["detail"].as_str().expect("detail");
    assert!(detail.contains("the median step waits 3.1%") && detail.contains("Profiled batch 5"), "{detail}");
    let text = ok_stdout(mlprof(&["advise", &path]));
    assert!(!text.contains("Input-bound"), "{text}");
}

#[test]
fn pytorch_gpu_trace_gets_transfer_and_idle_advice_backed_by_the_tools() {
    let path = data("kineto/hta/timeline_analysis");
    let advice = advice(&path);
    let tools = ToolJson::of(&path);
    let transfer_findings = tools.transfers["findings"].as_array().expect("transfers findings");
    let pageable: i64 = transfer_findings
        .iter()
        .filter(|f| f["kind"] == "pageable_copy")
        .map(|f| f["time_lost_per_step_ps"].as_i64().expect("per step"))
        .sum();
    let copies = findings(&advice, "transfers");
    let finding =
        copies.iter().find(|f| f["title"].as_str().is_some_and(|t| t.contains("pageable"))).expect("pageable");
    assert_eq!(finding["time_lost_per_step_ps"].as_i64(), Some(pageable));
    assert!(finding["fixes"][0].as_str().expect("fix").contains("pin"), "{}", finding["fixes"]);
    let idle = findings(&advice, "device_idle");
    assert_eq!(idle.len(), 1);
    assert_eq!(idle[0]["rank"], 1, "the GPU idles more than half of each step");
    let tools_cited: Vec<&str> =
        idle[0]["evidence"].as_array().expect("evidence").iter().filter_map(|e| e["tool"].as_str()).collect();
    assert!(tools_cited.contains(&"gpu") && tools_cited.contains(&"transfers"), "{tools_cited:?}");
    assert_eq!(check(&advice, "kernel_launch")["status"], "clear", "0.5% of the step launching kernels");
    assert_eq!(check(&advice, "low_precision")["status"], "clear", "34% of device compute is 16-bit");
}

#[test]
fn memory_rule_reads_the_pytorch_cpu_profile() {
    let path = data("kineto/torch_profile/logdir");
    let advice = advice(&path);
    let memory = check(&advice, "memory");
    assert_eq!(memory["status"], "clear", "host memory has no capacity in the profile");
    assert!(memory["detail"].as_str().expect("detail").contains("cpu peak 4.27 MiB, no capacity recorded"));
    let tools = ToolJson::of(&path);
    let peak = resolve(tools.tool("memory_profile"), "[0].profile.allocators[0].summary.peak_stats.peak_bytes_in_use");
    assert_eq!(memory["cited"][0]["value"].as_f64(), Some(peak));
    assert!(peak > 4.0 * 1024.0 * 1024.0);
    // The same profile waits for a single-process DataLoader.
    let input = findings(&advice, "input_bound");
    let fixes = input[0]["fixes"].as_array().expect("fixes");
    assert!(fixes[0].as_str().expect("fix").contains("num_workers > 0"), "{fixes:?}");
}

#[test]
fn every_cited_number_equals_the_tool_result() {
    let mut compared = 0;
    for path in [
        "xspace/tf_keras2_input_bound",
        "xspace/tf_keras_pipelined",
        "kineto/hta/timeline_analysis",
        "kineto/torch_profile/logdir",
        "kineto/hta/critical_path/simple_add",
        "kineto/hta/nccl_parser_config",
        "kineto/hta/trace_file_list",
    ] {
        compared += assert_citations_match(&data(path));
    }
    assert!(compared > 40, "only {compared} numbers compared");
}

#[test]
fn table_numbers_findings_with_severity_time_lost_evidence_and_fix() {
    let text = ok_stdout(mlprof(&["advise", &data("xspace/tf_keras2_input_bound")]));
    assert!(text.starts_with("== advise ==\n"), "{text}");
    assert!(text.contains("1. [high] Input-bound: each step waits 59.1 ms for input"), "{text}");
    assert!(text.contains("Time lost: 59.1 ms per step (91.3% of the step time)"), "{text}");
    assert!(text.contains("   Evidence:\n") && text.contains("   Fix:\n"), "{text}");
    assert!(text.contains("## Checks\ninput_bound    found  1 finding\n"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100 || !l.contains(' ')), "{text}");
}

#[test]
fn a_profile_with_nothing_to_advise_says_so() {
    let out = mlprof(&["advise", &data("kineto/hta/trace_file_list")]);
    let text = ok_stdout(out);
    assert!(text.contains("Nothing to advise"), "{text}");
    let advice = advice(&data("kineto/hta/trace_file_list"));
    assert_eq!(advice["findings"].as_array().map(Vec::len), Some(0));
    assert_eq!(advice["schema_version"], 1);
    assert_eq!(check(&advice, "transfers")["status"], "clear");
}

#[test]
fn bad_requests_fail_with_one_line_and_exit_2() {
    for args in [
        vec!["advise".to_string(), data("no/such/profile")],
        vec!["advise".to_string(), data("xspace/tf_keras_pipelined"), "--host".into(), "nope".into()],
        vec!["advise".to_string(), data("xspace/tf_keras_pipelined"), "--session".into(), "nope".into()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = mlprof(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8(out.stderr).expect("UTF-8");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("mlprof: error: "), "{stderr}");
    }
}

//! The Nsight Systems reader against real exports of three nsys versions (2022.1 on
//! Windows, 2022.4, 2026.1; `tests/data/nsys/`): what each table becomes in the XSpace
//! layout, checked against counts and sums computed from the same files with Python's
//! `sqlite3` (the README of `tests/data` lists the queries' results), and the errors for
//! files that are not exports.

use std::path::{Path, PathBuf};

use mlprof_formats::discover;
use mlprof_model::{Host, Plane, names};

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/nsys").join(path)
}

fn load(path: &str) -> Host {
    let mut sessions = discover::load(&fixture(path)).expect("the export loads");
    assert_eq!(sessions.len(), 1, "{path}: one session");
    let mut hosts = sessions.remove(0).hosts;
    assert_eq!(hosts.len(), 1, "{path}: one host");
    hosts.remove(0)
}

fn plane<'h>(host: &'h Host, name: &str) -> &'h Plane {
    host.planes.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no plane {name}"))
}

/// `(event name, duration ps, stat `stat` as text)` of every event on `plane`'s lines
/// whose names start with `line_prefix`.
fn events(plane: &Plane, line_prefix: &str, stat: &str) -> Vec<(String, i64, String)> {
    let key = plane.stat_metadata.iter().position(|m| m.name == stat).map(|k| k as u32);
    let mut out = Vec::new();
    for line in plane.lines.iter().filter(|l| l.name.starts_with(line_prefix)) {
        for event in line.iter() {
            let name = plane.event_metadata[event.metadata_index() as usize].name.clone();
            let text = key
                .and_then(|key| event.own_stat(key))
                .map(|value| plane.format_value(event.store(), value))
                .unwrap_or_default();
            out.push((name, event.duration_ps(), text));
        }
    }
    out
}

fn plane_text_stat(plane: &Plane, name: &str) -> Option<String> {
    plane.plane_stat(name).map(|value| plane.format_value(&plane.metadata_stats, value))
}

#[test]
fn a_2026_export_gives_its_kernels_copies_and_runtime_calls() {
    // 4 kernels (536,542 ns in all), 8 host-to-device copies of 100 MB and 4
    // device-to-host ones, 44 runtime calls on one thread, an RTX 4060 Ti.
    let host = load("testcuda_2026_1/report1.sqlite");
    let gpu = plane(&host, "/device:GPU:0");
    let kernels: Vec<_> = events(gpu, "Stream #", "kernel_details")
        .into_iter()
        .filter(|(name, _, _)| !name.starts_with("Memcpy"))
        .collect();
    assert_eq!(kernels.len(), 4);
    assert_eq!(kernels.iter().map(|k| k.1).sum::<i64>(), 536_542_000);
    assert_eq!(kernels[0].0, "add_parallel(const float *, const float *, float *, int)");
    assert!(kernels[0].2.starts_with("regs:16 static_shared:0 dynamic_shared:0 grid:97657,1,1 block:256,1,1"));
    let copies = events(gpu, "Stream #", "memcpy_details");
    let h2d: Vec<_> = copies.iter().filter(|c| c.0 == "MemcpyH2D").collect();
    let d2h: Vec<_> = copies.iter().filter(|c| c.0 == "MemcpyD2H").collect();
    assert_eq!((h2d.len(), d2h.len()), (8, 4));
    assert_eq!(h2d.iter().map(|c| c.1).sum::<i64>(), 61_322_687_000);
    // Pinned host memory (srcKind 1 in nsys's numbering), started by cudaMemcpyAsync.
    assert_eq!(h2d[0].2, "kind_src:pinned kind_dst:device size:100000000 dest:0 async:1");
    assert_eq!(plane_text_stat(gpu, "gpu_device_name").as_deref(), Some("NVIDIA GeForce RTX 4060 Ti"));

    let cpu = plane(&host, names::HOST_PLANE);
    let calls = events(cpu, "Host Threads/17068", "");
    assert_eq!(calls.len(), 44);
    assert_eq!(calls.iter().filter(|c| c.0 == "cudaMemcpyAsync").count(), 12, "names without _v3020");
    assert_eq!(calls.iter().filter(|c| c.0 == "cudaLaunchKernel").count(), 4);
    let metadata = plane(&host, names::METADATA_PLANE);
    assert_eq!(plane_text_stat(metadata, "nsys_version").as_deref(), Some("2026.1.1.204"));
    assert_eq!(host.profile_start_ns, Some(1_769_308_002_162_486_533));
}

#[test]
fn a_2022_windows_export_with_text_in_a_code_page_reads() {
    // Its EXPORT_USER is not UTF-8 (`Gei\xe1`), which stops Python's sqlite3: 12
    // kernels, 30 copies and 17 memsets over 15 streams, 184 runtime calls and 76 NVTX
    // push/pop ranges on one thread.
    let host = load("extrap_2022_1_win/profile1.sqlite");
    let gpu = plane(&host, "/device:GPU:0");
    let ops = events(gpu, "Stream #", "");
    assert_eq!(ops.len(), 12 + 30 + 17);
    assert_eq!(ops.iter().filter(|o| o.0.starts_with("Memset")).count(), 17);
    assert_eq!(ops.iter().filter(|o| o.0.starts_with("Memcpy")).count(), 30);
    assert_eq!(gpu.lines.len(), 15);
    let cpu = plane(&host, names::HOST_PLANE);
    let nvtx = events(cpu, "Host Threads/", "");
    assert_eq!(nvtx.len(), 184 + 76);
    let ranges: Vec<_> = cpu.lines.iter().filter(|l| l.name.ends_with("/NVTX")).collect();
    assert_eq!(ranges.iter().map(|l| l.len()).sum::<usize>(), 76);
}

#[test]
fn nvtx_ranges_marks_and_domains_become_events_on_each_threads_nvtx_line() {
    // Made by nsys 2022.4.2 from `nvtx_workload.py`: 7 marks, 17 push/pop ranges (on the
    // main thread and two workers, in domain "worker"), 5 start/end ranges of 5.09 ms
    // and more; the messages are in StringIds (textId), not in `text`.
    let host = load("nvtx_2022_4/nvtx_py.sqlite");
    let cpu = plane(&host, names::HOST_PLANE);
    let all = events(cpu, "Host Threads/", "");
    assert_eq!(all.len(), 7 + 17 + 5);
    assert_eq!(cpu.lines.len(), 3, "the main thread and two workers");
    let count = |name: &str| all.iter().filter(|e| e.0 == name).count();
    assert_eq!(count("NVTX:async_range"), 5);
    assert_eq!(count("NVTX:mlprof_test:step_mark"), 5);
    assert_eq!(count("NVTX:start_mark"), 1);
    assert_eq!(all.iter().filter(|e| e.0.starts_with("NVTX:worker:thread_")).count(), 2);
    let first_async = all.iter().find(|e| e.0 == "NVTX:async_range").expect("a start/end range");
    // Its row: start 46,397,824 ns, end 51,490,149 ns.
    assert_eq!(first_async.1, (51_490_149 - 46_397_824) * 1000);
    assert!(host.planes.iter().all(|p| !p.is_gpu()), "no CUDA activity, no GPU plane");
}

#[test]
fn files_that_are_not_exports_are_one_line_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A SQLite database of something else.
    let other = dir.path().join("other.sqlite");
    let db = rusqlite::Connection::open(&other).expect("create");
    db.execute_batch("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1);").expect("fill");
    drop(db);
    let error = discover::load(&other).expect_err("not an export").to_string();
    assert!(error.contains("other.sqlite") && error.contains("not an Nsight Systems export"), "{error}");
    // An export cut after its first pages.
    let real = std::fs::read(fixture("testcuda_2026_1/report1.sqlite")).expect("fixture");
    for keep in [100, 4096, 65_536, real.len() / 2] {
        let cut = dir.path().join(format!("cut_{keep}.sqlite"));
        std::fs::write(&cut, &real[..keep]).expect("write");
        let error = discover::load(&cut).expect_err("truncated").to_string();
        assert!(error.contains(&format!("cut_{keep}.sqlite")) && !error.contains('\n'), "{error}");
    }
    // Bytes overwritten in the middle: an error or a host, never a panic.
    let mut damaged = real.clone();
    for byte in damaged.iter_mut().skip(8192).step_by(97).take(2000) {
        *byte ^= 0x5a;
    }
    let path = dir.path().join("damaged.sqlite");
    std::fs::write(&path, &damaged).expect("write");
    let _ = discover::load(&path);
    // Empty.
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").expect("write");
    assert!(discover::load(&empty).is_err());
}

#[test]
fn an_export_that_asks_for_a_gpu_per_row_is_refused() {
    // 65,537 kernels on as many devices: a few bytes a row, a plane each.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("planes.sqlite");
    let mut db = rusqlite::Connection::open(&path).expect("create");
    db.execute_batch(
        "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT);
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, end INTEGER, deviceId INTEGER);",
    )
    .expect("tables");
    let rows = db.transaction().expect("transaction");
    for device in 0..=65_536 {
        rows.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (0, 1, ?1)", [device]).expect("row");
    }
    rows.commit().expect("commit");
    drop(db);
    let error = discover::load(&path).expect_err("refused").to_string();
    assert!(error.contains("planes.sqlite") && error.contains("more than 65536 GPUs"), "{error}");
}

#[test]
fn os_runtime_calls_are_a_plane_of_their_own_with_a_line_per_thread() {
    // Python's sqlite3: 906 OSRT_API rows on 5 threads; `ioctl` 786 times, 695,032,793
    // ns in all; `poll` 15 times.
    let host = load("testcuda_2026_1/report1.sqlite");
    let plane = plane(&host, mlprof_formats::nsys::OS_RUNTIME_PLANE);
    assert_eq!(plane.lines.len(), 5);
    assert_eq!(plane.event_count(), 906);
    let calls = events(plane, "OS runtime/", "return_value");
    let ioctl: Vec<_> = calls.iter().filter(|(name, _, _)| name == "ioctl").collect();
    assert_eq!(ioctl.len(), 786);
    assert_eq!(ioctl.iter().map(|(_, duration, _)| duration).sum::<i64>(), 695_032_793_000);
    assert_eq!(calls.iter().filter(|(name, _, _)| name == "poll").count(), 15);
    // A plane beside XProf's: between the host plane and the metadata plane.
    assert!(plane_names(&host).ends_with(&["/host:CPU", mlprof_formats::nsys::OS_RUNTIME_PLANE, "/host:metadata"]));
}

fn plane_names(host: &Host) -> Vec<&str> {
    host.planes.iter().map(|p| p.name.as_str()).collect()
}

#[test]
fn cuda_memory_operations_are_allocator_events_with_running_totals() {
    // Python's sqlite3 over CUDA_GPU_MEMORY_USAGE_EVENTS in start order: 30 operations
    // of 4,000,000 bytes on device 0 for each of memKind 1 (pinned) and 2 (device),
    // half of them frees; each kind peaks at 20,000,000 bytes and ends at 0.
    let host = load("extrap_2022_1_win/profile1.sqlite");
    let plane = plane(&host, names::HOST_PLANE);
    let line = plane.lines.iter().find(|l| l.name == mlprof_formats::nsys::CUDA_MEMORY_LINE).expect("the line");
    assert_eq!(line.len(), 60);
    let allocated = plane.find_stat_key("bytes_allocated").expect("totals");
    let allocator = plane.find_stat_key("allocator_name").expect("allocators");
    let mut peaks = std::collections::BTreeMap::new();
    for event in line.iter() {
        let name = plane.format_value(event.store(), event.own_stat(allocator).expect("allocator"));
        let Some(mlprof_model::StatValue::Int(total)) = event.own_stat(allocated) else { panic!("a total") };
        let peak = peaks.entry(name).or_insert(0);
        *peak = (*peak).max(total);
    }
    let want: Vec<(String, i64)> = vec![("cuda:0 device".into(), 20_000_000), ("cuda:0 pinned".into(), 20_000_000)];
    assert_eq!(peaks.into_iter().collect::<Vec<_>>(), want);
}

/// Per metric of the counters plane's line `GPU <gpu>`: (readings kept, first and last
/// time in ns, the integral of the value over time in value·ns, a reading holding until
/// the next).
fn counter_integrals(host: &Host, gpu: u32) -> std::collections::BTreeMap<String, (usize, i64, i64, f64)> {
    let plane = plane(host, names::sampled::COUNTERS_PLANE);
    let line = plane.lines.iter().find(|l| l.name == format!("GPU {gpu}")).expect("the GPU's line");
    let key = plane.find_stat_key(names::sampled::COUNTER_VALUE_STAT).expect("values");
    let mut readings: std::collections::BTreeMap<String, Vec<(i64, f64)>> = Default::default();
    for event in line.iter() {
        let Some(mlprof_model::StatValue::Double(value)) = event.own_stat(key) else { panic!("a value") };
        let name = plane.event_metadata[event.metadata_index() as usize].name.clone();
        readings.entry(name).or_default().push((event.start_ps() / 1000, value));
    }
    readings
        .into_iter()
        .map(|(name, points)| {
            let integral = points.windows(2).map(|w| w[0].1 * (w[1].0 - w[0].0) as f64).sum();
            (name, (points.len(), points[0].0, points[points.len() - 1].0, integral))
        })
        .collect()
}

/// The same integrals by SQL over the export (`samples` selects timestamp, metric name
/// and value), every sample counted: what mlprof keeps must draw and sum the same.
fn sql_integrals(path: &str, samples: &str) -> std::collections::BTreeMap<String, (i64, i64, f64)> {
    let db = rusqlite::Connection::open(fixture(path)).expect("the fixture opens");
    let sql = format!(
        "SELECT name, MIN(t), MAX(t), TOTAL(v * (next - t)) FROM (SELECT t, name, v, LEAD(t) OVER (PARTITION BY name \
         ORDER BY t) AS next FROM ({samples}) WHERE t >= 0) GROUP BY name"
    );
    let mut statement = db.prepare(&sql).expect("the query");
    let rows = statement
        .query_map([], |row| Ok((row.get::<_, String>(0)?, (row.get(1)?, row.get(2)?, row.get(3)?))))
        .expect("rows");
    rows.map(|row| row.expect("a row")).collect()
}

fn assert_same_series(host: &Host, path: &str, samples: &str, names_: &[&str]) {
    let ours = counter_integrals(host, 0);
    let theirs = sql_integrals(path, samples);
    assert_eq!(ours.keys().map(String::as_str).collect::<Vec<_>>(), names_);
    for (name, (kept, first, last, integral)) in &ours {
        let (sql_first, sql_last, sql_integral) = theirs[name];
        assert_eq!((*first, *last), (sql_first, sql_last), "{name}: span");
        assert_eq!(*integral, sql_integral, "{name}: value over time");
        assert!(*kept <= 106, "{name}: {kept} readings");
    }
}

#[test]
fn gpu_metrics_are_a_counter_line_per_gpu_that_draws_and_sums_as_every_sample() {
    // nsys 2023.4+ layout (`scripts/gen_nsys_gpu_metrics.py`): 107 samples of 8 metrics
    // at 1 kHz, one before the session start.
    let path = "gpu_metrics_2026_1/report1_gpu_metrics.sqlite";
    let host = load(path);
    let samples = "SELECT g.timestamp AS t, m.metricName AS name, g.value AS v FROM GPU_METRICS g JOIN \
                   TARGET_INFO_GPU_METRICS m USING (typeId, metricId)";
    let metrics = [
        "DRAM Read Bandwidth [Throughput %]",
        "GPC Clock Frequency [MHz]",
        "GR Active [Throughput %]",
        "PCIe RX Throughput [Throughput %]",
        "PCIe TX Throughput [Throughput %]",
        "SM Issue [Throughput %]",
        "SMs Active [Throughput %]",
        "Tensor Active [Throughput %]",
    ];
    assert_same_series(&host, path, samples, &metrics);
    // Runs of equal readings keep their first: 848 samples, 87 readings.
    assert_eq!(plane(&host, names::sampled::COUNTERS_PLANE).event_count(), 87);
    assert!(plane_names(&host).ends_with(&[names::sampled::COUNTERS_PLANE, "/host:metadata"]));
    // The kernels' plane is unchanged by the metrics beside it.
    assert_eq!(
        plane(&host, "/device:GPU:0").event_count(),
        plane(&load("testcuda_2026_1/report1.sqlite"), "/device:GPU:0").event_count()
    );
}

#[test]
fn gpu_metrics_of_nsys_before_2023_4_are_read_from_generic_events() {
    // The JSON layout of nsys ≤ 2023.3, names without units, on the GTX 1060 of a
    // three-GPU Windows export.
    let path = "gpu_metrics_2022_1/profile1_gpu_metrics.sqlite";
    let host = load(path);
    let samples = "SELECT g.timestamp AS t, j.key AS name, j.value AS v FROM GENERIC_EVENTS g, json_each(g.data) j";
    let metrics = [
        "DRAM Read Bandwidth",
        "GPC Clock Frequency",
        "GR Active",
        "PCIe RX Throughput",
        "PCIe TX Throughput",
        "SM Active",
        "SM Issue",
        "Tensor Active",
    ];
    assert_same_series(&host, path, samples, &metrics);
}

#[test]
fn gpu_metrics_name_the_gpu_by_its_cuda_ordinal_and_unsigned_values_read_back() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("metrics.sqlite");
    let db = rusqlite::Connection::open(&path).expect("create");
    db.execute_batch(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE TARGET_INFO_GPU (id INTEGER NOT NULL, cuDevice INTEGER, name TEXT);
         INSERT INTO TARGET_INFO_GPU VALUES (1, 0, 'NVIDIA H100'), (2, 1, 'NVIDIA H100'), (3, 5, 'one'), (4, 5, 'two');
         CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL,
           typeName TEXT NOT NULL, metricId INTEGER NOT NULL, metricName TEXT NOT NULL);
         INSERT INTO TARGET_INFO_GPU_METRICS VALUES (0x0100000200001001, 2, 'GPU 1', 3, 'GPC Clock Frequency [MHz]');
         CREATE TABLE GPU_METRICS (timestamp INTEGER, typeId INTEGER NOT NULL, metricId INTEGER NOT NULL,
           value INTEGER NOT NULL);
         INSERT INTO GPU_METRICS VALUES (1000, 0x0100000200001001, 3, 1980), (2000, 0x0100000200001001, 3, -1),
           (-500, 0x0100000200001001, 3, 7), (1500, 0x0100000200001002, 7, 55), (1500, 0x0100000200001003, 7, 1);",
    )
    .expect("tables");
    drop(db);
    let mut sessions = discover::load(&path).expect("loads");
    let host = sessions.remove(0).hosts.remove(0);
    let plane = plane(&host, names::sampled::COUNTERS_PLANE);
    let lines: Vec<&str> = plane.lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(lines, ["GPU 0", "GPU 1", "GPU 3"], "nsys GPUs 1 and 2 are CUDA devices 0 and 1; 3 shares its with 4");
    let gpu0 = counter_integrals(&host, 0);
    // 1980 MHz from 1 µs to 2 µs, then 2^32 - 1 stored as -1; the sample before the
    // session start is dropped.
    assert_eq!(gpu0["GPC Clock Frequency [MHz]"], (2, 1000, 2000, 1980.0 * 1000.0));
    let key = plane.find_stat_key(names::sampled::COUNTER_VALUE_STAT).expect("values");
    let last = plane.lines[0].iter().last().expect("a reading");
    assert_eq!(last.own_stat(key), Some(mlprof_model::StatValue::Double(4_294_967_295.0)));
    assert_eq!(counter_integrals(&host, 1).keys().collect::<Vec<_>>(), ["metric 7"], "a metric without a name row");
}

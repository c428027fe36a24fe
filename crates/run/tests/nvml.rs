//! `mlprof_run::nvml` without a GPU: a mock libnvidia-ml (`tests/nvml/mock_nvml.c`, built
//! here with the C compiler, one library per behaviour so that tests running at once share
//! no state) stands in for NVIDIA's. Without a C compiler each mock test says so and
//! passes, unless `MLPROF_REQUIRE_PEERS` or `CI` is set (as `.ci/run` does): then it fails.

use std::ffi::{CStr, CString, c_int};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use mlprof_run::nvml::{GpuDevice, GpuProcessMemory, GpuReading, Nvml};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// A mock library built for one behaviour, in a directory removed on drop.
struct Mock {
    _dir: tempfile::TempDir,
    library: PathBuf,
}

/// The mock built with `-DMOCK_MODE=MODE_<mode>`, or `None` when there is no C compiler
/// and none is required.
fn mock(mode: &str, test: &str) -> Option<Mock> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nvml/mock_nvml.c");
    let library = dir.path().join(format!("libmock_nvml_{}.so", mode.to_lowercase()));
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-O1", "-Wall", "-shared", "-fPIC"]).arg(format!("-DMOCK_MODE=MODE_{mode}"));
    cc.arg("-o").arg(&library).arg(&source);
    let out = match cc.output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(var) = ["MLPROF_REQUIRE_PEERS", "CI"].into_iter().find(|v| std::env::var_os(v).is_some()) {
                panic!("{test}: no C compiler (cc) to build the mock NVML, but {var} is set");
            }
            // Straight to stderr: the harness hides `eprintln!` of a passing test.
            use std::io::Write;
            let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: no C compiler (cc) to build the mock NVML");
            return None;
        }
        Err(e) => panic!("{test}: cc: {e}"),
    };
    assert!(out.status.success(), "cc for {mode}: {}", String::from_utf8_lossy(&out.stderr));
    Some(Mock { _dir: dir, library })
}

/// The value of the mock's counter function `name` (`mock_nvml_live`, `mock_nvml_unbalanced`)
/// in the copy of the library loaded from `library`.
fn mock_counter(library: &Path, name: &CStr) -> c_int {
    let path = CString::new(library.as_os_str().as_bytes()).expect("a path without NUL");
    // SAFETY: RTLD_NOLOAD only finds the library the test already loaded (never closed by
    // mlprof), and the symbol is the mock's `int name(void)`.
    unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        assert!(!handle.is_null(), "{} is loaded", library.display());
        let symbol = libc::dlsym(handle, name.as_ptr());
        assert!(!symbol.is_null(), "the mock has {name:?}");
        let counter = std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> c_int>(symbol);
        counter()
    }
}

fn device(index: u32, name: &str, uuid: &str, memory_total_bytes: Option<u64>) -> GpuDevice {
    GpuDevice { index, name: name.to_string(), uuid: uuid.to_string(), memory_total_bytes }
}

fn mock_devices() -> Vec<GpuDevice> {
    vec![
        device(0, "Mock H100 0", "GPU-00000000-1111-2222-3333-444444444444", Some(80 * GIB)),
        device(1, "Mock H100 1", "GPU-55555555-6666-7777-8888-999999999999", Some(80 * GIB)),
    ]
}

/// The readings of MODE_OK.
fn mock_readings() -> Vec<GpuReading> {
    vec![
        GpuReading {
            index: 0,
            utilization_gpu_percent: Some(87),
            utilization_memory_percent: Some(41),
            memory_used_bytes: Some(3 * GIB),
            sm_clock_mhz: Some(1980),
            power_milliwatts: Some(312_000),
            temperature_celsius: Some(64),
            processes: vec![
                GpuProcessMemory { pid: 4242, used_bytes: Some(512 * MIB) },
                GpuProcessMemory { pid: 4343, used_bytes: Some(256 * MIB) },
            ],
        },
        GpuReading {
            index: 1,
            utilization_gpu_percent: Some(0),
            utilization_memory_percent: Some(0),
            memory_used_bytes: Some(0),
            sm_clock_mhz: Some(345),
            power_milliwatts: Some(70_000),
            temperature_celsius: Some(33),
            processes: vec![GpuProcessMemory { pid: 5151, used_bytes: None }],
        },
    ]
}

#[test]
fn two_devices_read_as_the_library_reports_them_and_drop_shuts_nvml_down() {
    let Some(mock) = mock("OK", "two_devices") else { return };
    let mut nvml = Nvml::open_at(&mock.library).expect("the mock opens");
    assert_eq!(nvml.devices(), mock_devices().as_slice());
    assert_eq!(nvml.read(), mock_readings());
    assert_eq!(nvml.read(), mock_readings(), "a second reading");
    assert_eq!(mock_counter(&mock.library, c"mock_nvml_live"), 1);

    let second = Nvml::open_at(&mock.library).expect("opened twice");
    assert_eq!(mock_counter(&mock.library, c"mock_nvml_live"), 2);
    drop(second);
    drop(nvml);
    assert_eq!(mock_counter(&mock.library, c"mock_nvml_live"), 0, "each open is shut down once");
    assert_eq!(mock_counter(&mock.library, c"mock_nvml_unbalanced"), 0);
}

#[test]
fn a_driver_that_is_not_loaded_gives_one_line_and_no_counters() {
    let Some(mock) = mock("INIT_FAILS", "init_fails") else { return };
    let err = Nvml::open_at(&mock.library).err().expect("nvmlInit_v2 fails");
    assert_eq!(err.reason, "NVML: nvmlInit_v2 failed: Driver Not Loaded (9)");
    assert_eq!(err.to_string(), err.reason);
    assert_eq!(mock_counter(&mock.library, c"mock_nvml_unbalanced"), 0, "no nvmlShutdown without an init");
}

#[test]
fn a_missing_library_is_not_found_and_a_file_that_is_no_library_says_why() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let missing = dir.path().join("libnvidia-ml.so.1");
    let err = Nvml::open_at(&missing).err().expect("nothing to load");
    assert_eq!(err.reason, format!("no NVIDIA driver: {} not found", missing.display()));

    let not_a_library = dir.path().join("libnvidia-ml.so.2");
    std::fs::write(&not_a_library, b"not an ELF file\n").expect("write the file");
    let err = Nvml::open_at(&not_a_library).err().expect("not a library");
    let prefix = format!("no NVIDIA driver: {} could not be loaded: ", not_a_library.display());
    assert!(err.reason.starts_with(&prefix), "{}", err.reason);
    assert!(!err.reason.contains('\n'), "{}", err.reason);
}

#[test]
fn a_library_without_nvml_init_is_refused() {
    let Some(mock) = mock("NOT_NVML", "not_nvml") else { return };
    let err = Nvml::open_at(&mock.library).err().expect("no nvmlInit_v2");
    assert_eq!(err.reason, format!("NVML: {} has no nvmlInit_v2", mock.library.display()));
}

#[test]
fn unsupported_counters_are_none_and_the_others_are_read() {
    let Some(mock) = mock("NOT_SUPPORTED", "not_supported") else { return };
    let mut nvml = Nvml::open_at(&mock.library).expect("the mock opens");
    let devices = mock_devices();
    assert_eq!(nvml.devices(), &[devices[0].clone(), device(1, "", "", None)]);
    let readings = nvml.read();
    let mut first = mock_readings().swap_remove(0);
    first.utilization_gpu_percent = None;
    first.utilization_memory_percent = None;
    first.power_milliwatts = None;
    first.processes = Vec::new();
    assert_eq!(readings, vec![first, GpuReading { index: 1, ..GpuReading::default() }]);
}

#[test]
fn three_hundred_processes_all_come_back() {
    let Some(mock) = mock("MANY_PROCESSES", "many_processes") else { return };
    let mut nvml = Nvml::open_at(&mock.library).expect("the mock opens");
    let expected: Vec<GpuProcessMemory> =
        (0..300).map(|i| GpuProcessMemory { pid: 10_000 + i, used_bytes: Some(u64::from(i + 1) * MIB) }).collect();
    for attempt in 0..2 {
        let readings = nvml.read();
        assert_eq!(readings.len(), 2);
        assert_eq!(readings[0].processes, expected, "reading {attempt}");
        assert_eq!(readings[1].processes, mock_readings()[1].processes, "reading {attempt}");
    }
}

#[test]
fn an_old_driver_reads_processes_through_v2_and_lacks_only_power() {
    let Some(mock) = mock("OLD_DRIVER", "old_driver") else { return };
    let mut nvml = Nvml::open_at(&mock.library).expect("the mock opens");
    let mut expected = mock_readings();
    for reading in &mut expected {
        reading.power_milliwatts = None;
    }
    assert_eq!(nvml.read(), expected);
}

#[test]
fn a_library_that_answers_absurdly_causes_no_panic_and_no_overrun() {
    let Some(mock) = mock("HOSTILE", "hostile") else { return };
    let mut nvml = Nvml::open_at(&mock.library).expect("the mock opens");
    let devices = nvml.devices().to_vec();
    assert_eq!(devices.len(), 2, "only the devices that have handles");
    for d in &devices {
        assert_eq!(d.name, "N".repeat(96), "a name without NUL stops at the buffer's end");
        assert_eq!(d.uuid, "U".repeat(80), "a UUID without NUL stops at the buffer's end");
    }
    let readings = nvml.read();
    let processes = &readings[0].processes;
    assert!((1..=4096).contains(&processes.len()), "{} processes", processes.len());
    assert!(processes.iter().zip(1..).all(|(p, pid)| p.pid == pid), "only the entries written");
    assert!(readings[1].processes.is_empty(), "a device that always wants more gets none");
}

#[test]
fn open_either_lists_devices_or_says_why_in_one_line() {
    // The machine's own driver, or none: either way one line or a list, never a panic.
    match Nvml::open() {
        Ok(mut nvml) => {
            assert!(!nvml.devices().is_empty());
            assert_eq!(nvml.read().len(), nvml.devices().len());
        }
        Err(err) => {
            assert!(err.reason.starts_with("no NVIDIA driver: ") || err.reason.starts_with("NVML: "), "{err}");
            assert!(!err.reason.contains('\n'), "{err}");
        }
    }
}

#[test]
fn nvml_moves_to_a_sampling_thread() {
    fn send<T: Send>() {}
    send::<Nvml>();
}

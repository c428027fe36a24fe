//! The two readers mlprof's patch adds to py-spy (`vendor/py-spy/MLPROF_PATCH.md`), on
//! this test process's own memory and threads: `PageReader`, which reads a sample's
//! memory a block at a time and a stack's code objects in one call, and `ThreadStates`,
//! which keeps each Python thread's `/proc` `stat` file open between samples. (The
//! vendored crate is outside the workspace, so its behaviour is pinned here; end to end,
//! `run_sampling.rs` samples real interpreters through both.)

use std::cell::Cell;

use py_spy::page_reader::PageReader;
use py_spy::thread_states::ThreadStates;
use remoteprocess::{Error, Process, ProcessMemory};

/// This process's memory, read as another process's is (process_vm_readv), counting the
/// reads that reach it one by one.
struct Counted {
    process: Process,
    reads: Cell<usize>,
}

impl Counted {
    fn new() -> Counted {
        Counted { process: Process { pid: std::process::id() as i32 }, reads: Cell::new(0) }
    }
}

impl ProcessMemory for Counted {
    fn read(&self, addr: usize, buf: &mut [u8]) -> Result<(), Error> {
        self.reads.set(self.reads.get() + 1);
        self.process.read(addr, buf)
    }
}

fn own_pid() -> Option<i32> {
    Some(std::process::id() as i32)
}

/// Address 4096 is never mapped on Linux (`vm.mmap_min_addr` is at least 4096).
const UNMAPPED: usize = 4096;

#[test]
fn reads_within_a_block_cost_one_read_of_it() {
    let data: Vec<u64> = (0..4096).collect();
    let process = Counted::new();
    let reader = PageReader::new(&process, None);
    let base = data.as_ptr() as usize;
    let at = [10usize, 11, 12, 13, 2000, 2001, 2002, 4095];
    for i in at {
        let value: u64 = reader.copy_struct(base + i * 8).unwrap();
        assert_eq!(value, i as u64);
    }
    // Three runs of values, each in a 1 KiB block or straddling two.
    assert!(process.reads.get() <= 5, "{} reads for {} values", process.reads.get(), at.len());
}

#[test]
fn a_read_across_blocks_and_a_read_longer_than_a_block_are_whole() {
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let process = Counted::new();
    let reader = PageReader::new(&process, own_pid());
    let base = data.as_ptr() as usize;
    let boundary = ((base + 5000) & !1023) - base;
    assert_eq!(reader.copy(base + boundary - 10, 100).unwrap(), data[boundary - 10..boundary + 90]);
    assert_eq!(reader.copy(base + 3, 9000).unwrap(), data[3..9003]);
    assert_eq!(reader.copy(base + boundary - 1, 1).unwrap(), data[boundary - 1..boundary]);
}

#[test]
fn prefetched_blocks_come_in_one_call_and_serve_the_reads_after_it() {
    let data: Vec<u64> = (0..8192).collect();
    let process = Counted::new();
    let reader = PageReader::new(&process, own_pid());
    let base = data.as_ptr() as usize;
    let at = [100usize, 1500, 3000, 6000, 8000];
    reader.prefetch(at.iter().map(|i| (base + i * 8, 8)));
    for i in at {
        let value: u64 = reader.copy_struct(base + i * 8).unwrap();
        assert_eq!(value, i as u64);
    }
    // With the pid, the blocks came in one process_vm_readv, not through `read`.
    assert_eq!(process.reads.get(), 0);
}

#[test]
fn an_unreadable_block_fails_its_read_and_spares_the_rest_of_the_call() {
    let data: Vec<u64> = (0..1024).collect();
    let process = Counted::new();
    let reader = PageReader::new(&process, own_pid());
    let base = data.as_ptr() as usize;
    // The kernel stops the call at the unmapped block; the reader reads on past it.
    reader.prefetch([(UNMAPPED, 8), (base, 8), (base + 4096, 8)]);
    assert_eq!(reader.copy_struct::<u64>(base + 8).unwrap(), 1);
    assert_eq!(reader.copy_struct::<u64>(base + 4096 + 16).unwrap(), 514);
    assert_eq!(process.reads.get(), 0, "the blocks after the unreadable one were read");
    assert!(reader.copy_struct::<u64>(UNMAPPED).is_err());
    // The failed read went to the process itself, for its own error.
    assert_eq!(process.reads.get(), 1);
}

#[test]
fn a_reused_reader_reads_memory_afresh() {
    let mut data: Vec<u64> = vec![1; 512];
    let process = Counted::new();
    let base = data.as_ptr() as usize;
    let reader = PageReader::new(&process, own_pid());
    assert_eq!(reader.copy_struct::<u64>(base).unwrap(), 1);
    let blocks = reader.into_blocks();
    data[0] = 2;
    std::hint::black_box(&mut data);
    let reader = PageReader::reusing(&process, own_pid(), blocks);
    assert_eq!(reader.copy_struct::<u64>(base).unwrap(), 2, "a new sample must not see the last one's blocks");
}

#[test]
fn reads_past_what_a_reader_holds_go_to_the_process() {
    // 300 blocks apart: more than one reader holds (256).
    let data: Vec<u8> = vec![7; 300 * 1024];
    let process = Counted::new();
    let reader = PageReader::new(&process, own_pid());
    let base = data.as_ptr() as usize;
    for block in 0..300 {
        assert_eq!(reader.copy_struct::<u8>(base + block * 1024).unwrap(), 7);
    }
    assert!(process.reads.get() >= 40, "{} reads went to the process", process.reads.get());
}

fn own_tid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

#[test]
fn a_running_thread_reads_running_through_a_file_kept_open_until_a_sample_skips_it() {
    let mut states = ThreadStates::new(std::process::id() as i32);
    assert_eq!(states.activity(own_tid()), Some(true));
    assert_eq!(states.open_files(), 1);
    // Read again through the same file: the kernel writes the state afresh.
    assert_eq!(states.activity(own_tid()), Some(true));
    assert_eq!(states.open_files(), 1);
    states.end_sample();
    assert_eq!(states.open_files(), 1);
    states.end_sample();
    assert_eq!(states.open_files(), 0, "a thread not read in a sample has its file closed");
}

#[test]
fn a_sleeping_thread_reads_idle_and_an_ended_one_reads_none() {
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let sleeper = std::thread::spawn(move || {
        tid_tx.send(own_tid()).unwrap();
        let _ = done_rx.recv();
    });
    let tid = tid_rx.recv().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut states = ThreadStates::new(std::process::id() as i32);
    assert_eq!(states.activity(tid), Some(false));
    assert_eq!(states.open_files(), 1);
    done_tx.send(()).unwrap();
    sleeper.join().unwrap();
    assert_eq!(states.activity(tid), None);
    assert_eq!(states.open_files(), 0);
    assert_eq!(states.activity(i32::MAX), None);
}

//! mlprof patch: one sample's reads of another process's memory, a 1 KiB block at a time.
//!
//! A sample of a Python process reads each thread's state, every frame of its stack and
//! every code object those frames run: small structs, one system call each (about 65
//! calls per process per sample in a PyTorch training loop). A Python 3.11+ stack lives
//! in one contiguous data stack, so most of its frames share a block; and once the frames
//! are known, the blocks of all their code objects can be read in a single
//! `process_vm_readv`. A [`PageReader`] keeps the blocks it read for one sample only:
//! the process runs on, and a block read now is stale by the next sample.

use std::cell::RefCell;

use remoteprocess::{Error, ProcessMemory};

/// The block size, bytes: a whole number of blocks make a page on every platform, so a
/// block is readable exactly when its page is mapped. Smaller blocks copy less and share
/// less: with a PyTorch loop's three processes at 100 Hz, mlprof's sampling took 0.70 s
/// of CPU per 20 s with 1 KiB blocks, 0.80 s with 4 KiB and 0.81 s with 512 bytes.
const BLOCK: usize = 1024;
/// The most blocks one reader keeps (256 KiB); past this, reads go straight to the
/// process.
const MOST_BLOCKS: usize = 256;
/// The most blocks read in one system call (Linux's `IOV_MAX`).
const MOST_BLOCKS_PER_CALL: usize = 1024;

/// The blocks one sample read, kept from sample to sample only for their memory (a
/// sampler reads tens of blocks a hundred times a second).
#[derive(Default)]
pub struct Blocks {
    /// The blocks' bytes, one after the other.
    data: Vec<u8>,
    /// Each block's address and where its bytes start in `data` (`None`: unreadable).
    /// A sample reads a few dozen blocks, so a list is searched faster than a map.
    index: Vec<(usize, Option<usize>)>,
}

impl Blocks {
    fn find(&self, address: usize) -> Option<Option<usize>> {
        self.index.iter().find(|(block, _)| *block == address).map(|(_, at)| *at)
    }
}

/// Reads through to `process`, keeping every block it read; to be dropped (or
/// emptied by [`Self::into_blocks`]) after one sample.
pub struct PageReader<'a, P: ProcessMemory> {
    process: &'a P,
    /// The process id, for reading several blocks in one call (`None`: a block at a time).
    pid: Option<i32>,
    blocks: RefCell<Blocks>,
}

impl<'a, P: ProcessMemory> PageReader<'a, P> {
    /// A reader of `process`, whose id `pid` (where known) lets several blocks be read in
    /// one call.
    pub fn new(process: &'a P, pid: Option<i32>) -> PageReader<'a, P> {
        PageReader::reusing(process, pid, Blocks::default())
    }

    /// [`Self::new`], keeping the blocks in the memory of `blocks` (emptied first).
    pub fn reusing(process: &'a P, pid: Option<i32>, mut blocks: Blocks) -> PageReader<'a, P> {
        blocks.data.clear();
        blocks.index.clear();
        PageReader { process, pid, blocks: RefCell::new(blocks) }
    }

    /// The blocks' memory, for the next sample's reader.
    pub fn into_blocks(self) -> Blocks {
        self.blocks.into_inner()
    }

    /// Reads the blocks under every `(address, length)` range not read yet, in as few
    /// calls as the kernel allows; ranges longer than a block are left to [`Self::read`].
    pub fn prefetch(&self, ranges: impl IntoIterator<Item = (usize, usize)>) {
        let mut wanted: Vec<usize> = Vec::new();
        {
            let blocks = self.blocks.borrow();
            for (address, length) in ranges {
                let Some(span) = blocks_under(address, length) else { continue };
                for block in span {
                    if blocks.find(block).is_none() && !wanted.contains(&block) {
                        wanted.push(block);
                    }
                }
            }
            wanted.truncate(MOST_BLOCKS.saturating_sub(blocks.index.len()));
        }
        self.fetch(&wanted);
    }

    /// Reads `wanted` (addresses of blocks not held yet) and keeps them.
    fn fetch(&self, wanted: &[usize]) {
        let mut rest = wanted;
        let mut blocks = self.blocks.borrow_mut();
        while !rest.is_empty() {
            let batch = &rest[..rest.len().min(MOST_BLOCKS_PER_CALL)];
            let start = blocks.data.len();
            blocks.data.resize(start + batch.len() * BLOCK, 0);
            let whole = self.read_blocks(batch, &mut blocks.data[start..]);
            blocks.data.truncate(start + whole * BLOCK);
            for (n, address) in batch.iter().take(whole).enumerate() {
                blocks.index.push((*address, Some(start + n * BLOCK)));
            }
            match batch.get(whole) {
                // The call stopped at this block: it cannot be read.
                Some(unreadable) => {
                    blocks.index.push((*unreadable, None));
                    rest = &rest[whole + 1..];
                }
                None => rest = &rest[whole..],
            }
        }
    }

    /// Reads `batch` in order into `into` (a block's room each), returning how many were
    /// read before the first that could not be (all of them when none failed).
    #[cfg(target_os = "linux")]
    fn read_blocks(&self, batch: &[usize], into: &mut [u8]) -> usize {
        let Some(pid) = self.pid else { return self.read_blocks_one_by_one(batch, into) };
        let local: Vec<libc::iovec> = into
            .chunks_exact_mut(BLOCK)
            .map(|block| libc::iovec { iov_base: block.as_mut_ptr().cast(), iov_len: BLOCK })
            .collect();
        let remote: Vec<libc::iovec> =
            batch.iter().map(|&address| libc::iovec { iov_base: address as *mut libc::c_void, iov_len: BLOCK }).collect();
        // Safety: every local iovec is a distinct BLOCK-byte chunk of `into`, borrowed
        // mutably for the call; the remote ones are only read by the kernel, which checks
        // them against the other process's mappings.
        let copied = unsafe {
            libc::process_vm_readv(
                pid,
                local.as_ptr(),
                local.len() as libc::c_ulong,
                remote.as_ptr(),
                remote.len() as libc::c_ulong,
                0,
            )
        };
        // The kernel stops at the first block it cannot read (a failure on the first one
        // is -1); blocks are whole, so the count says how many were read.
        usize::try_from(copied).unwrap_or(0) / BLOCK
    }

    #[cfg(not(target_os = "linux"))]
    fn read_blocks(&self, batch: &[usize], into: &mut [u8]) -> usize {
        self.read_blocks_one_by_one(batch, into)
    }

    fn read_blocks_one_by_one(&self, batch: &[usize], into: &mut [u8]) -> usize {
        let mut read = 0;
        for (address, block) in batch.iter().zip(into.chunks_exact_mut(BLOCK)) {
            if self.process.read(*address, block).is_err() {
                break;
            }
            read += 1;
        }
        read
    }

    /// Copies `buf.len()` bytes at `address` from the blocks held, reading the missing
    /// ones; false where a block cannot be held or read.
    fn read_from_blocks(&self, address: usize, buf: &mut [u8]) -> bool {
        let Some(span) = blocks_under(address, buf.len()) else { return false };
        let missing: Vec<usize> = {
            let blocks = self.blocks.borrow();
            span.clone().filter(|block| blocks.find(*block).is_none()).collect()
        };
        if self.blocks.borrow().index.len() + missing.len() > MOST_BLOCKS {
            return false;
        }
        self.fetch(&missing);
        let blocks = self.blocks.borrow();
        let mut done = 0;
        for block in span {
            let Some(Some(at)) = blocks.find(block) else { return false };
            let from = (address + done).saturating_sub(block);
            let take = (BLOCK - from).min(buf.len() - done);
            buf[done..done + take].copy_from_slice(&blocks.data[at + from..at + from + take]);
            done += take;
        }
        done == buf.len()
    }
}

impl<P: ProcessMemory> ProcessMemory for PageReader<'_, P> {
    fn read(&self, addr: usize, buf: &mut [u8]) -> Result<(), Error> {
        // A read longer than a block (a long string, a line table) is one call anyway.
        if buf.len() <= BLOCK && self.read_from_blocks(addr, buf) {
            return Ok(());
        }
        self.process.read(addr, buf)
    }
}

/// The addresses of the blocks `length` bytes at `address` fall in; `None` for an empty
/// range, one longer than a block, or one that wraps around the address space.
fn blocks_under(address: usize, length: usize) -> Option<std::iter::StepBy<std::ops::RangeInclusive<usize>>> {
    if length == 0 || length > BLOCK {
        return None;
    }
    let last = address.checked_add(length - 1)?;
    Some((address & !(BLOCK - 1)..=last & !(BLOCK - 1)).step_by(BLOCK))
}

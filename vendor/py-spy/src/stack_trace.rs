use std::sync::Arc;

use anyhow::{Context, Error, Result};

use remoteprocess::{Pid, ProcessMemory};
use serde_derive::Serialize;

use crate::config::{Config, LineNo};
use crate::page_reader::PageReader;
use crate::python_data_access::{copy_bytes, copy_string};
use crate::python_interpreters::{
    CodeObject, FrameObject, InterpreterState, ThreadState, TupleObject,
};

/// Call stack for a single python thread
#[derive(Debug, Clone, Serialize)]
pub struct StackTrace {
    /// The process id than generated this stack trace
    pub pid: Pid,
    /// The python thread id for this stack trace
    pub thread_id: u64,
    // The python thread name for this stack trace
    pub thread_name: Option<String>,
    /// The OS thread id for this stack tracee
    pub os_thread_id: Option<u64>,
    /// Whether or not the thread was active
    pub active: bool,
    /// Whether or not the thread held the GIL
    pub owns_gil: bool,
    /// The frames
    pub frames: Vec<Frame>,
    /// process commandline / parent process info
    pub process_info: Option<Arc<ProcessInfo>>,
}

/// Information about a single function call in a stack trace
#[derive(Debug, Hash, Eq, PartialEq, Ord, PartialOrd, Clone, Serialize)]
pub struct Frame {
    /// The function name
    pub name: String,
    /// The full filename of the file
    pub filename: String,
    /// The module/shared library the
    pub module: Option<String>,
    /// A short, more readable, representation of the filename
    pub short_filename: Option<String>,
    /// The line number inside the file (or 0 for native frames without line information)
    pub line: i32,
    /// Local Variables associated with the frame
    pub locals: Option<Vec<LocalVariable>>,
    /// If this is an entry frame. Each entry frame corresponds to one native frame (Python 3.11)
    pub is_entry: bool,
    /// If the last frame was a shim. This is used in Python 3.12+ to detect entry frames.
    pub is_shim_entry: bool,
}

#[derive(Debug, Hash, Eq, PartialEq, Ord, PartialOrd, Clone, Serialize)]
pub struct LocalVariable {
    pub name: String,
    pub addr: usize,
    pub arg: bool,
    pub repr: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessInfo {
    pub pid: Pid,
    pub command_line: String,
    pub parent: Option<Box<ProcessInfo>>,
}

/// Given an InterpreterState, this function returns a vector of stack traces for each thread
pub fn get_stack_traces<I, P>(
    interpreter_address: usize,
    process: &P,
    threadstate_address: usize,
    config: Option<&Config>,
) -> Result<Vec<StackTrace>, Error>
where
    I: InterpreterState,
    P: ProcessMemory,
{
    let gil_thread_id = get_gil_threadid::<I, P>(threadstate_address, process)?;

    let threadstate_ptr_ptr = I::threadstate_ptr_ptr(interpreter_address);
    let mut threads: *const I::ThreadState = process
        .copy_struct(threadstate_ptr_ptr as usize)
        .context("Failed to copy PyThreadState head pointer")?;

    let mut ret = Vec::new();

    let lineno = config.map(|c| c.lineno).unwrap_or(LineNo::NoLine);
    let dump_locals = config.map(|c| c.dump_locals).unwrap_or(0);

    while !threads.is_null() {
        let thread = process
            .copy_pointer(threads)
            .context("Failed to copy PyThreadState")?;

        let mut trace = get_stack_trace(&thread, process, dump_locals > 0, lineno)?;
        trace.owns_gil = trace.thread_id == gil_thread_id;

        ret.push(trace);
        // This seems to happen occasionally when scanning BSS addresses for valid interpreters
        if ret.len() > 4096 {
            return Err(format_err!("Max thread recursion depth reached"));
        }
        threads = thread.next();
    }
    Ok(ret)
}

/// Gets a stack trace for an individual thread
pub fn get_stack_trace<T, P>(
    thread: &T,
    process: &P,
    copy_locals: bool,
    lineno: LineNo,
) -> Result<StackTrace, Error>
where
    T: ThreadState,
    P: ProcessMemory,
{
    let process = PageReader::new(process, None);
    get_stack_trace_cached(thread, &process, copy_locals, lineno, &mut CodeCache::default())
}

/// mlprof patch: the most code objects a [`CodeCache`] holds before it starts over.
const CODE_CACHE_CAPACITY: usize = 16384;

/// mlprof patch: what each code object names (file, function, line table), read from the
/// process once per code object instead of once per frame per sample. Python never
/// changes a code object's strings or line table; an entry is used only while the code
/// object at its address still holds, byte for byte past its reference count and type,
/// what it held when the entry was made (every pointer to its strings, tuples and bytes,
/// its counts and first line), so a code object freed and another allocated at its
/// address is read again.
#[derive(Default)]
pub struct CodeCache {
    entries: std::collections::HashMap<usize, CachedCode>,
}

struct CachedCode {
    /// The code object's bytes past [`OBJECT_HEADER`].
    identity: Vec<u8>,
    filename: String,
    name: String,
    line_table: Option<Vec<u8>>,
}

/// mlprof patch: an object's reference count and type pointer, which lead every code
/// object and are left out of its identity (the count changes all the time).
const OBJECT_HEADER: usize = 2 * std::mem::size_of::<usize>();

/// mlprof patch: copies the code object at `ptr`, returning it and the bytes it was read
/// from (one read, as `copy_pointer` does).
fn copy_code<C: CodeObject, P: ProcessMemory>(ptr: *const C, process: &P) -> Result<(C, Vec<u8>), Error> {
    let bytes = process.copy(ptr as usize, std::mem::size_of::<C>())?;
    // Safety: `bytes` holds size_of::<C>() bytes, and C, a bindgen struct of integers and
    // pointers, is valid for every bit pattern (what `copy_struct` requires of it too);
    // unaligned because a Vec<u8> is only byte-aligned.
    let code = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<C>()) };
    Ok((code, bytes))
}

impl CodeCache {
    /// The file and function of the code object `code` copied from `address`, and, for
    /// `lasti` (the frame's last instruction), its line from the line table (`None` when
    /// the table could not be read); `None` when its strings could not be read (a torn
    /// read of a process that runs on). Only complete reads are kept.
    fn named<C: CodeObject, P: ProcessMemory>(
        &mut self,
        address: usize,
        code: &C,
        code_bytes: &[u8],
        process: &P,
        lasti: Option<i32>,
    ) -> Option<(String, String, Option<i32>)> {
        let with_table = lasti.is_some();
        let line_of = |table: &[u8]| lasti.map(|lasti| code.get_line_number(lasti, table));
        let identity = code_bytes.get(OBJECT_HEADER..).unwrap_or_default();
        if let Some(cached) = self.entries.get(&address) {
            if cached.identity == identity && (!with_table || cached.line_table.is_some()) {
                let line = cached.line_table.as_deref().and_then(line_of);
                return Some((cached.filename.clone(), cached.name.clone(), line));
            }
        }
        let filename = copy_string(code.filename(), process).ok()?;
        let name = match code.qualname() {
            Some(qualname_ptr) => {
                copy_string(qualname_ptr, process).or_else(|_| copy_string(code.name(), process))
            }
            None => copy_string(code.name(), process),
        }
        .ok()?;
        let line_table = if with_table {
            copy_bytes(code.line_table(), process).ok()
        } else {
            None
        };
        let line = line_table.as_deref().and_then(line_of);
        if !with_table || line_table.is_some() {
            if self.entries.len() >= CODE_CACHE_CAPACITY {
                self.entries.clear();
            }
            self.entries.insert(
                address,
                CachedCode {
                    identity: identity.to_vec(),
                    filename: filename.clone(),
                    name: name.clone(),
                    line_table,
                },
            );
        }
        Some((filename, name, line))
    }
}

/// Gets a stack trace for an individual thread, reading each code object's names through
/// `cache`, and the frames and code objects through `process` a block at a time: the
/// frames first, then the blocks of all their code objects in one call (mlprof patch).
pub fn get_stack_trace_cached<T, P>(
    thread: &T,
    process: &PageReader<'_, P>,
    copy_locals: bool,
    lineno: LineNo,
    cache: &mut CodeCache,
) -> Result<StackTrace, Error>
where
    T: ThreadState,
    P: ProcessMemory,
{
    // TODO: just return frames here? everything else probably should be returned out of scope
    let mut frames = Vec::new();

    // python 3.11+ has an extra level of indirection to get the Frame from the threadstate
    let mut frame_address = thread.frame_address();
    if let Some(addr) = frame_address {
        frame_address = Some(process.copy_struct(addr)?);
    }

    let mut frame_ptr = thread.frame(frame_address);

    // We are iterating in reverse, i.e. from last call to first call.
    // Since Python 3.12, there are shim frames inserted before a block
    // of Python frames. When we encounter one, update the last frame.
    let set_last_frame_as_shim_entry = &mut |frames: &mut Vec<Frame>| {
        if let Some(frame) = frames.last_mut() {
            frame.is_shim_entry = true;
        }
    };

    // mlprof patch: every frame first, for the code objects they run (a Python 3.11+
    // stack is one contiguous data stack, so most frames come from blocks already read);
    // then the blocks of all those code objects, in one call; then the frames again, now
    // from the blocks held, for their names and lines.
    let mut codes = Vec::new();
    let mut walked = frame_ptr;
    while !walked.is_null() {
        if codes.len() >= 4096 {
            return Err(format_err!("Max frame recursion depth reached"));
        }
        let frame = process
            .copy_pointer(walked)
            .context("Failed to copy PyFrameObject")?;
        if frame.is_python_frame() {
            codes.push(frame.code() as usize);
        }
        walked = frame.back();
    }
    let code_size = std::mem::size_of::<<T::FrameObject as FrameObject>::CodeObject>();
    process.prefetch(codes.iter().map(|&code| (code, code_size)));
    frames.reserve(codes.len());

    let mut visited = 0;
    while !frame_ptr.is_null() {
        visited += 1;
        if visited > 4096 {
            return Err(format_err!("Max frame recursion depth reached"));
        }

        let frame = process
            .copy_pointer(frame_ptr)
            .context("Failed to copy PyFrameObject")?;

        if !frame.is_python_frame() {
            frame_ptr = frame.back();
            set_last_frame_as_shim_entry(&mut frames);
            continue;
        }

        let (code, code_bytes) =
            copy_code(frame.code(), process).context("Failed to copy PyCodeObject")?;

        // Qualname first (Python 3.11+), else name; the line table only when lines are
        // wanted (mlprof patch: through the cache).
        let lasti = (lineno == LineNo::LastInstruction).then(|| frame.lasti());
        let Some((filename, name, line_in_table)) =
            cache.named(frame.code() as usize, &code, &code_bytes, process, lasti)
        else {
            // Guards against torn reads while sampling without pausing the process.
            frame_ptr = frame.back();
            set_last_frame_as_shim_entry(&mut frames);
            continue;
        };

        // skip <shim> entries in python 3.13+
        // Unset file/function name in py3.13 means this is a shim.
        if filename.is_empty() || filename == "<shim>" {
            frame_ptr = frame.back();
            set_last_frame_as_shim_entry(&mut frames);
            continue;
        }

        let line = match lineno {
            LineNo::NoLine => 0,
            LineNo::First => code.first_lineno(),
            LineNo::LastInstruction => match line_in_table
                .ok_or_else(|| format_err!("Failed to copy line number table"))
            {
                Ok(line) => line,
                Err(e) => {
                    // Failling to get the line number really shouldn't be fatal here, but
                    // can happen in extreme cases (https://github.com/benfred/py-spy/issues/164)
                    // Rather than fail set the linenumber to 0. This is used by the native extensions
                    // to indicate that we can't load a line number and it should be handled gracefully
                    warn!(
                        "Failed to get line number from {}.{}: {}",
                        filename, name, e
                    );
                    0
                }
            },
        };

        let locals = if copy_locals {
            Some(
                get_locals(&code, frame_ptr, &frame, process)
                    .context("Failed to get local variables")?,
            )
        } else {
            None
        };

        let is_entry = frame.is_entry();

        frames.push(Frame {
            name,
            filename,
            line,
            short_filename: None,
            module: None,
            locals,
            is_entry,
            is_shim_entry: false,
        });

        frame_ptr = frame.back();
    }

    // First frame is always a shim
    set_last_frame_as_shim_entry(&mut frames);

    Ok(StackTrace {
        pid: 0,
        frames,
        thread_id: thread.thread_id(),
        thread_name: None,
        owns_gil: false,
        active: true,
        os_thread_id: thread.native_thread_id(),
        process_info: None,
    })
}

impl StackTrace {
    pub fn status_str(&self) -> &str {
        match (self.owns_gil, self.active) {
            (_, false) => "idle",
            (true, true) => "active+gil",
            (false, true) => "active",
        }
    }

    pub fn format_threadid(&self) -> String {
        // native threadids in osx are kinda useless, use the pthread id instead
        #[cfg(target_os = "macos")]
        return format!("{:#X}", self.thread_id);

        // otherwise use the native threadid if given
        #[cfg(not(target_os = "macos"))]
        match self.os_thread_id {
            Some(tid) => format!("{}", tid),
            None => format!("{:#X}", self.thread_id),
        }
    }
}

fn get_locals<C: CodeObject, F: FrameObject, P: ProcessMemory>(
    code: &C,
    frameptr: *const F,
    frame: &F,
    process: &P,
) -> Result<Vec<LocalVariable>, Error> {
    let local_count = code.nlocals() as usize;
    let argcount = code.argcount() as usize;
    let varnames = process
        .copy_pointer(code.varnames())
        .context("Failed to get varnames from PyCodeObject")?;

    let ptr_size = std::mem::size_of::<*const i32>();
    let locals_addr = frameptr as usize + std::mem::size_of_val(frame) - ptr_size;

    let mut ret = Vec::new();

    for i in 0..local_count {
        let nameptr: *const C::StringObject =
            process.copy_struct(varnames.address(code.varnames() as usize, i))?;

        let name = copy_string(nameptr, process).context("Failed to copy local variable name")?;
        let addr: usize = process.copy_struct(locals_addr + i * ptr_size)?;

        // hack: handle things like None, True, False, small integer constants etc on Python 3.14
        let addr = if addr & 1 == 1 { addr - 1 } else { addr };

        if addr == 0 {
            continue;
        }
        ret.push(LocalVariable {
            name,
            addr,
            arg: i < argcount,
            repr: None,
        });
    }
    Ok(ret)
}

pub fn get_gil_threadid<I: InterpreterState, P: ProcessMemory>(
    threadstate_address: usize,
    process: &P,
) -> Result<u64, Error> {
    // happens during initialization when checking to see if we have a valid interpreter (before we've figured out the threadstate_address)
    if threadstate_address == 0 {
        return Ok(0);
    }

    let addr = if I::HAS_GIL_RUNTIME_STATE {
        // get the gilruntimestate - note that this struct is identical between 3.12/3.13/3.14
        let gil_state: crate::python_bindings::v3_13_0::_gil_runtime_state =
            process.copy_struct(threadstate_address)?;
        // check to see if the GIL is locked already
        if gil_state.locked != 0 {
            gil_state.last_holder as usize
        } else {
            0
        }
    } else {
        process.copy_struct::<usize>(threadstate_address)?
    };

    // if the addr is 0, no thread is currently holding the GIL
    let threadid = if addr != 0 {
        let threadstate: I::ThreadState = process.copy_struct(addr)?;
        threadstate.thread_id()
    } else {
        0
    };

    Ok(threadid)
}

impl ProcessInfo {
    pub fn to_frame(&self) -> Frame {
        Frame {
            name: format!("process {}:\"{}\"", self.pid, self.command_line),
            filename: String::from(""),
            module: None,
            short_filename: None,
            line: 0,
            locals: None,
            is_entry: true,
            is_shim_entry: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python_bindings::v3_7_0::PyCodeObject;
    use crate::python_data_access::tests::to_byteobject;
    use remoteprocess::LocalProcess;

    #[test]
    fn test_get_line_number() {
        let mut lnotab = to_byteobject(&[0u8, 1, 10, 1, 8, 1, 4, 1]);
        let code = PyCodeObject {
            co_firstlineno: 3,
            co_lnotab: &mut lnotab.base.ob_base.ob_base,
            ..Default::default()
        };
        let lineno = get_line_number(&code, 30, &LocalProcess).unwrap();
        assert_eq!(lineno, 7);
    }
}

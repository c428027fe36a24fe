//! Addresses in a process to frames people read: the executable mapping an address is
//! in (`/proc/PID/maps`), the ELF function there ([`elf`](super::elf)), its name
//! demangled (C++ and Rust). Code without a symbol is `module+0xADDRESS` (the start of
//! its function where unwind information says, else the address itself, both as ELF
//! virtual addresses, what `addr2line -e module` takes).
//!
//! Files are read once per run whoever maps them (keyed by path and inode), through
//! `/proc/PID/root` so a process in a container is read in its own file system; the
//! symbols kept are bounded by [`MAX_CACHED_ENTRIES`]; once spent, files read later
//! name their code `module+0x…` only.

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::elf::{ElfSymbols, Found};
use crate::sampling::store::Frame;

/// Symbols and unwind starts kept over all files (16 bytes or 8 bytes each: at most
/// about 48 MiB).
pub const MAX_CACHED_ENTRIES: usize = 3_000_000;
/// Demangled names kept per file.
const MAX_NAMES_PER_FILE: usize = 100_000;
/// The longest function name kept, characters (C++ templates run to pages).
const MAX_NAME_CHARS: usize = 1000;
/// A process's maps are read again for an address outside them at most this often.
const MAPS_REREAD: Duration = Duration::from_secs(1);

/// One executable mapping of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// The file offset mapped at `start`.
    pub offset: u64,
    /// The file's inode (0 for anonymous memory).
    pub inode: u64,
    /// The path (`[vdso]` for the kernel's, empty for anonymous memory).
    pub path: Arc<str>,
}

/// Parses `/proc/PID/maps` text, keeping the executable mappings, by start.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut mappings: Vec<Mapping> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(6, ' ');
            let (range, perms, offset, _dev, inode) =
                (fields.next()?, fields.next()?, fields.next()?, fields.next()?, fields.next()?);
            if !perms.contains('x') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let path = fields.next().unwrap_or("").trim_start();
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                inode: inode.parse().ok()?,
                path: path.strip_suffix(" (deleted)").unwrap_or(path).into(),
            })
        })
        .collect();
    mappings.sort_by_key(|m| m.start);
    mappings
}

/// What an address is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// Code, in this frame.
    Code(Frame),
    /// Not in any executable mapping: a frame-pointer walk that went astray.
    NotCode,
}

/// One process's executable mappings.
#[derive(Default)]
struct Process {
    mappings: Vec<Mapping>,
    read_at: Option<Instant>,
}

/// One file's functions, or why there are none.
enum Module {
    Read { elf: ElfSymbols, names: HashMap<usize, Arc<str>> },
    Unreadable,
}

/// Addresses to frames, for every process of the job.
#[derive(Default)]
pub struct Symbolizer {
    processes: HashMap<u32, Process>,
    modules: HashMap<(Arc<str>, u64), Module>,
    cached_entries: usize,
    /// Set once the symbol budget ran out (a note says so once).
    pub budget_spent: bool,
}

impl Symbolizer {
    /// Forgets `pid`'s mappings (it exited, or exec'd another program).
    pub fn forget(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }

    /// What `address` in `pid` is; `leaf` says it is where the thread was (not a return
    /// address, which points after its call). `maps_changed` is set when the process's
    /// mappings were read again and differ (cached answers may be stale).
    pub fn resolve(&mut self, pid: u32, address: u64, leaf: bool, maps_changed: &mut bool) -> Resolved {
        let address = if leaf { address } else { address.saturating_sub(1) };
        let process = self.processes.entry(pid).or_default();
        let mut mapping = find(&process.mappings, address);
        if mapping.is_none() && process.read_at.is_none_or(|at| at.elapsed() >= MAPS_REREAD) {
            let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
            let mappings = parse_maps(&text);
            *maps_changed |= process.read_at.is_some() && mappings != process.mappings;
            process.mappings = mappings;
            process.read_at = Some(Instant::now());
            mapping = find(&process.mappings, address);
        }
        let Some(mapping) = mapping.cloned() else { return Resolved::NotCode };
        Resolved::Code(self.frame(pid, &mapping, address))
    }

    fn frame(&mut self, pid: u32, mapping: &Mapping, address: u64) -> Frame {
        let path = &mapping.path;
        let short: Box<str> = path.rsplit('/').next().unwrap_or(path).into();
        let frame = |function: String| Frame {
            function: function.into(),
            file: (**path).into(),
            short_file: short.clone(),
            line: 0,
        };
        if path.is_empty() {
            return frame("[anonymous code]".into());
        }
        if path.starts_with('[') {
            return frame(path.to_string());
        }
        let offset = address - mapping.start + mapping.offset;
        let key = (path.clone(), mapping.inode);
        if !self.modules.contains_key(&key) {
            let module = self.read_module(pid, path);
            self.modules.insert(key.clone(), module);
        }
        let Some(Module::Read { elf, names }) = self.modules.get_mut(&key) else {
            return frame(format!("{short}+{offset:#x}"));
        };
        let Some(vaddr) = elf.vaddr(offset) else { return frame(format!("{short}+{offset:#x}")) };
        match elf.find(vaddr) {
            Found::Symbol { index, start } => {
                if let Some(name) = names.get(&index) {
                    return frame(name.to_string());
                }
                match open(pid, path).and_then(|file| elf.name(&file, index)) {
                    Some(raw) => {
                        let name: Arc<str> = demangle(&raw).into();
                        if names.len() < MAX_NAMES_PER_FILE {
                            names.insert(index, name.clone());
                        }
                        frame(name.to_string())
                    }
                    None => frame(format!("{short}+{start:#x}")),
                }
            }
            Found::Unnamed { start } => frame(format!("{short}+{start:#x}")),
            Found::Nowhere => frame(format!("{short}+{vaddr:#x}")),
        }
    }

    /// Reads the functions of `path` as `pid` maps it, within what is left of the budget.
    fn read_module(&mut self, pid: u32, path: &str) -> Module {
        if self.budget_spent {
            return Module::Unreadable;
        }
        let Some(file) = open(pid, path) else { return Module::Unreadable };
        match ElfSymbols::read(&file, MAX_CACHED_ENTRIES.saturating_sub(self.cached_entries)) {
            Ok(elf) => {
                self.cached_entries += elf.entries();
                self.budget_spent |= self.cached_entries >= MAX_CACHED_ENTRIES;
                Module::Read { elf, names: HashMap::new() }
            }
            Err(_) => Module::Unreadable,
        }
    }
}

fn find(mappings: &[Mapping], address: u64) -> Option<&Mapping> {
    let index = mappings.partition_point(|m| m.start <= address);
    index.checked_sub(1).and_then(|i| mappings.get(i)).filter(|m| address < m.end)
}

/// `path` as process `pid` sees it (its root may be a container's), else as mlprof does.
fn open(pid: u32, path: &str) -> Option<File> {
    File::open(format!("/proc/{pid}/root{path}")).or_else(|_| File::open(path)).ok()
}

/// A symbol's name as people read it: Rust (legacy or v0) and C++ (Itanium) names
/// demangled, anything else as it is; at most [`MAX_NAME_CHARS`] characters.
pub fn demangle(raw: &str) -> String {
    let mut name = if let Ok(rust) = rustc_demangle::try_demangle(raw) {
        format!("{rust:#}")
    } else if raw.starts_with("_Z") {
        // A panic in the demangler must cost one name, not the sampler.
        std::panic::catch_unwind(|| crate::cupti_profile::demangle(raw)).unwrap_or_else(|_| raw.to_string())
    } else {
        raw.to_string()
    };
    if let Some((cut, _)) = name.char_indices().nth(MAX_NAME_CHARS) {
        name.truncate(cut);
        name.push('…');
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    #[unsafe(no_mangle)]
    extern "C" fn mlprof_native_symbol_marker(x: u64) -> u64 {
        std::hint::black_box(x).wrapping_mul(31)
    }

    fn function(resolved: Resolved) -> (String, String) {
        match resolved {
            Resolved::Code(frame) => (frame.function.into(), frame.short_file.into()),
            Resolved::NotCode => ("not code".into(), String::new()),
        }
    }

    #[test]
    fn maps_lines_become_executable_mappings() {
        let text = "\
55d0c0000000-55d0c0001000 r--p 00000000 08:01 123 /usr/bin/python3.11
55d0c0001000-55d0c0200000 r-xp 00001000 08:01 123 /usr/bin/python3.11
7f0000000000-7f0000001000 rwxp 00000000 00:00 0 
7f0000002000-7f0000003000 r-xp 00002000 08:01 77 /tmp/lib with space.so (deleted)
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
garbage line
";
        let maps = parse_maps(text);
        assert_eq!(maps.len(), 4);
        assert_eq!((maps[0].start, maps[0].offset, &*maps[0].path), (0x55d0_c000_1000, 0x1000, "/usr/bin/python3.11"));
        assert_eq!(&*maps[1].path, "");
        assert_eq!(&*maps[2].path, "/tmp/lib with space.so");
        assert_eq!(&*maps[3].path, "[vdso]");
        assert_eq!(find(&maps, 0x55d0_c000_1000).map(|m| m.inode), Some(123));
        assert_eq!(find(&maps, 0x55d0_c020_0000), None);
    }

    #[test]
    fn functions_of_this_binary_and_of_libc_are_named() {
        let mut symbolizer = Symbolizer::default();
        let me = std::process::id();
        let mut changed = false;
        let own = mlprof_native_symbol_marker as *const () as usize as u64;
        let (name, module) = function(symbolizer.resolve(me, own + 2, true, &mut changed));
        assert_eq!(name, "mlprof_native_symbol_marker");
        assert!(!module.is_empty());
        // A return address just past the function's start is still inside it.
        assert_eq!(function(symbolizer.resolve(me, own + 1, false, &mut changed)).0, name);
        let libc_function = libc::getpid as *const () as usize as u64;
        let (name, module) = function(symbolizer.resolve(me, libc_function, true, &mut changed));
        assert!(name.ends_with("getpid"), "{name} in {module}");
        assert!(module.starts_with("libc"), "{module}");
        // Nothing is mapped at address 16.
        assert_eq!(symbolizer.resolve(me, 16, false, &mut changed), Resolved::NotCode);
        assert!(!changed);
    }

    #[test]
    fn names_are_demangled() {
        let cases = [
            ("_ZN3foo3barEv", "foo::bar()"),
            ("_ZN4core3ptr13drop_in_place17h0123456789abcdefE", "core::ptr::drop_in_place"),
            ("deflate", "deflate"),
            ("_Znot a symbol", "_Znot a symbol"),
        ];
        for (raw, name) in cases {
            assert_eq!(demangle(raw), name, "{raw}");
        }
        assert_eq!(demangle(&"a".repeat(5000)).chars().count(), MAX_NAME_CHARS + 1);
    }
}

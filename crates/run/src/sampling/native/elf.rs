//! The functions of one ELF file (64-bit, little-endian): where each starts and ends,
//! from `.symtab` (or `.dynsym` when the file is stripped), and where every function
//! with unwind information starts, from `.eh_frame_hdr`, for the code no symbol names.
//!
//! Shared libraries of ML frameworks run to gigabytes, so nothing reads a whole file:
//! the headers, the symbol table and the `.eh_frame_hdr` table are read with `pread`,
//! names are read from the string table only for the functions samples land in, and
//! the tables kept are bounded by the caller's budget.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Symbols read per `pread`.
const SYMBOLS_PER_READ: usize = 16_384;
/// The longest name read, bytes.
const MAX_NAME_BYTES: usize = 4096;
/// A symbol of size 0 is taken to run to the next symbol, at most this far, bytes.
const UNSIZED_REACH: u64 = 64 * 1024;

/// One function with a symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Symbol {
    /// Its first address (ELF virtual address).
    start: u64,
    /// Its length, bytes.
    len: u32,
    /// Its name's offset in the string table.
    name: u32,
}

/// Where an address lies among a file's functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// In the function with a symbol.
    Symbol {
        /// Which symbol (for [`ElfSymbols::name`]).
        index: usize,
        /// Its first address.
        start: u64,
    },
    /// In a function without a symbol (known from its unwind information).
    Unnamed {
        /// Its first address.
        start: u64,
    },
    /// In no function the file describes.
    Nowhere,
}

/// One ELF file's functions.
#[derive(Debug, Default)]
pub struct ElfSymbols {
    /// `PT_LOAD` segments: file offset, virtual address, bytes in the file.
    loads: Vec<(u64, u64, u64)>,
    /// Functions with symbols, by start.
    symbols: Vec<Symbol>,
    /// The string table the names are in: file offset, bytes.
    strings: (u64, u64),
    /// Starts of the functions with unwind information, in order.
    unwind_starts: Vec<u64>,
}

/// Why a file's functions could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// Reading failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Not an ELF file mlprof reads.
    #[error("not a 64-bit little-endian ELF file")]
    NotElf,
}

impl ElfSymbols {
    /// Reads `file`'s functions, keeping at most `budget` entries (symbols and unwind
    /// starts together).
    pub fn read(file: &File, budget: usize) -> Result<ElfSymbols, ElfError> {
        let mut header = [0u8; 64];
        file.read_exact_at(&mut header, 0)?;
        if header[..4] != *b"\x7fELF" || header[4] != 2 || header[5] != 1 {
            return Err(ElfError::NotElf);
        }
        let mut elf = ElfSymbols::default();
        let mut eh_frame_hdr = None;
        for ph in table(file, u64_at(&header, 0x20), u16_at(&header, 0x36), u16_at(&header, 0x38), 56) {
            let (kind, offset, vaddr, filesz) = (u32_at(&ph, 0), u64_at(&ph, 8), u64_at(&ph, 16), u64_at(&ph, 32));
            match kind {
                1 => elf.loads.push((offset, vaddr, filesz)),
                0x6474_e550 => eh_frame_hdr = Some((offset, vaddr, filesz)),
                _ => {}
            }
        }
        let sections = table(file, u64_at(&header, 0x28), u16_at(&header, 0x3a), u16_at(&header, 0x3c), 64);
        // `.symtab` holds every function `.dynsym` does and the local ones too.
        let symtab = [2, 11].into_iter().find_map(|kind| sections.iter().find(|s| u32_at(s, 4) == kind));
        if let Some(symtab) = symtab {
            let link = usize::try_from(u32_at(symtab, 0x28)).unwrap_or(usize::MAX);
            if let Some(strtab) = sections.get(link) {
                elf.strings = (u64_at(strtab, 0x18), u64_at(strtab, 0x20));
                elf.read_symbols(file, u64_at(symtab, 0x18), u64_at(symtab, 0x20), budget)?;
            }
        }
        if let Some((offset, vaddr, size)) = eh_frame_hdr {
            let left = budget.saturating_sub(elf.symbols.len());
            elf.unwind_starts = unwind_starts(file, offset, vaddr, size, left).unwrap_or_default();
        }
        Ok(elf)
    }

    fn read_symbols(&mut self, file: &File, offset: u64, size: u64, budget: usize) -> std::io::Result<()> {
        let count = usize::try_from(size / 24).unwrap_or(usize::MAX).min(budget);
        // (symbol, binding rank: global before weak before local).
        let mut found: Vec<(Symbol, u8)> = Vec::new();
        let mut chunk = vec![0u8; SYMBOLS_PER_READ * 24];
        let mut done = 0;
        while done < count {
            let n = (count - done).min(SYMBOLS_PER_READ);
            let bytes = &mut chunk[..n * 24];
            file.read_exact_at(bytes, offset + done as u64 * 24)?;
            for entry in bytes.chunks_exact(24) {
                let (name, info, shndx, value, len) =
                    (u32_at(entry, 0), entry[4], u16_at(entry, 6), u64_at(entry, 8), u64_at(entry, 16));
                // Functions (STT_FUNC, STT_GNU_IFUNC) defined in this file.
                if matches!(info & 0xf, 2 | 10) && shndx != 0 && value != 0 {
                    let rank = match info >> 4 {
                        1 => 0,
                        2 => 1,
                        _ => 2,
                    };
                    found.push((Symbol { start: value, len: u32::try_from(len).unwrap_or(u32::MAX), name }, rank));
                }
            }
            done += n;
        }
        found.sort_by_key(|&(symbol, rank)| (symbol.start, rank, std::cmp::Reverse(symbol.len)));
        found.dedup_by_key(|(symbol, _)| symbol.start);
        let starts: Vec<u64> = found.iter().map(|(s, _)| s.start).collect();
        self.symbols = found.into_iter().map(|(symbol, _)| symbol).collect();
        for (i, symbol) in self.symbols.iter_mut().enumerate() {
            if symbol.len == 0 {
                let next = starts.get(i + 1).copied().unwrap_or(u64::MAX);
                symbol.len = u32::try_from(next.saturating_sub(symbol.start).min(UNSIZED_REACH)).unwrap_or(0);
            }
        }
        Ok(())
    }

    /// The virtual address of byte `offset` of the file, where a loaded segment holds it.
    pub fn vaddr(&self, offset: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|&&(start, _, size)| offset >= start && offset - start < size)
            .map(|&(start, vaddr, _)| vaddr.wrapping_add(offset - start))
    }

    /// Where `vaddr` lies.
    pub fn find(&self, vaddr: u64) -> Found {
        let index = self.symbols.partition_point(|s| s.start <= vaddr);
        if let Some(symbol) = index.checked_sub(1).and_then(|i| self.symbols.get(i))
            && vaddr - symbol.start < u64::from(symbol.len)
        {
            return Found::Symbol { index: index - 1, start: symbol.start };
        }
        let index = self.unwind_starts.partition_point(|&start| start <= vaddr);
        match index.checked_sub(1).and_then(|i| self.unwind_starts.get(i)) {
            Some(&start) => Found::Unnamed { start },
            None => Found::Nowhere,
        }
    }

    /// The raw (mangled) name of symbol `index`, read from `file`.
    pub fn name(&self, file: &File, index: usize) -> Option<String> {
        let symbol = self.symbols.get(index)?;
        let (offset, size) = self.strings;
        let at = u64::from(symbol.name);
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 256];
        while bytes.len() < MAX_NAME_BYTES && at + (bytes.len() as u64) < size {
            let want = (size - at - bytes.len() as u64).min(chunk.len() as u64) as usize;
            let n = file.read_at(&mut chunk[..want], offset + at + bytes.len() as u64).ok()?;
            if n == 0 {
                break;
            }
            if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
                bytes.extend_from_slice(&chunk[..end]);
                return String::from_utf8(bytes).ok().filter(|name| !name.is_empty());
            }
            bytes.extend_from_slice(&chunk[..n]);
        }
        None
    }

    /// Entries kept (what the caller's budget counts).
    pub fn entries(&self) -> usize {
        self.symbols.len() + self.unwind_starts.len()
    }
}

/// The `count` entries of `entry_size` bytes (at least `min_size`) from `offset`: the
/// program or section header table; empty when it is absent or cannot be read.
fn table(file: &File, offset: u64, entry_size: u16, count: u16, min_size: usize) -> Vec<Vec<u8>> {
    let size = usize::from(entry_size);
    if offset == 0 || size < min_size {
        return Vec::new();
    }
    let mut bytes = vec![0u8; size * usize::from(count)];
    if file.read_exact_at(&mut bytes, offset).is_err() {
        return Vec::new();
    }
    bytes.chunks_exact(size).map(<[u8]>::to_vec).collect()
}

/// The function starts of `.eh_frame_hdr`'s search table (the segment at file
/// `offset`, virtual address `vaddr`, `size` bytes), at most `budget`; `None` in an
/// encoding other than the one every Linux linker writes (4-byte entries relative to
/// the header).
fn unwind_starts(file: &File, offset: u64, vaddr: u64, size: u64, budget: usize) -> Option<Vec<u64>> {
    let mut head = [0u8; 12];
    file.read_exact_at(&mut head, offset).ok()?;
    let [version, pointer_encoding, count_encoding, table_encoding, ..] = head;
    // DW_EH_PE_udata4 / sdata4 for the pointer and count; datarel | sdata4 for the table.
    if version != 1
        || !matches!(pointer_encoding & 0x0f, 0x03 | 0x0b)
        || count_encoding != 0x03
        || table_encoding != 0x3b
    {
        return None;
    }
    let count = usize::try_from(u32_at(&head, 8)).ok()?;
    let count = count.min(usize::try_from(size.saturating_sub(12) / 8).ok()?).min(budget);
    let mut table = vec![0u8; count * 8];
    file.read_exact_at(&mut table, offset + 12).ok()?;
    let mut starts: Vec<u64> =
        table.chunks_exact(8).map(|entry| vaddr.wrapping_add_signed(i64::from(u32_at(entry, 0) as i32))).collect();
    starts.sort_unstable();
    Some(starts)
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    bytes.get(at..at + 2).and_then(|b| b.try_into().ok()).map_or(0, u16::from_le_bytes)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    bytes.get(at..at + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_le_bytes)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // Kept a function of its own: the assertion looks for its name among the symbols, and
    // inlined into the test harness's closure it has none.
    #[inline(never)]
    fn this_test_binary_names_its_own_functions() {
        let file = File::open("/proc/self/exe").unwrap();
        let elf = ElfSymbols::read(&file, 10_000_000).unwrap();
        assert!(elf.symbols.len() > 100, "{} symbols", elf.symbols.len());
        assert!(!elf.loads.is_empty());
        // Every symbol's name is readable, and one of them is this test's.
        let names: Vec<String> = (0..elf.symbols.len()).filter_map(|i| elf.name(&file, i)).collect();
        assert!(names.iter().any(|n| n.contains("this_test_binary_names_its_own_functions")));
        // A symbol's start is found as itself, and a byte inside it too.
        let Found::Symbol { index, start } = elf.find(elf.symbols[10].start + 1) else { panic!("not found") };
        assert_eq!((index, start), (10, elf.symbols[10].start));
    }

    #[test]
    fn a_tiny_budget_bounds_what_is_kept() {
        let file = File::open("/proc/self/exe").unwrap();
        let elf = ElfSymbols::read(&file, 50).unwrap();
        assert!(elf.entries() <= 50, "{}", elf.entries());
    }

    #[test]
    fn not_elf_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        std::fs::write(&path, vec![7u8; 100]).unwrap();
        assert!(matches!(ElfSymbols::read(&File::open(&path).unwrap(), 10), Err(ElfError::NotElf)));
        std::fs::write(&path, b"\x7fELF").unwrap();
        assert!(ElfSymbols::read(&File::open(&path).unwrap(), 10).is_err());
    }
}

//! A decoder of the data-only subset of Python's pickle format (protocols 2 to 5):
//! `None`, booleans, integers of up to 64 bits (signed or unsigned), floats, strings,
//! lists, tuples and dicts, with the memo that lets one object be referred to many
//! times. It is what PyTorch's
//! memory snapshots (`torch.cuda.memory._dump_snapshot`) are written with.
//!
//! The one design decision to know: nothing here ever runs pickle code. Opcodes that
//! name a class or call one (`GLOBAL`, `STACK_GLOBAL`, `REDUCE`, `BUILD`, `INST`,
//! `OBJ`, `NEWOBJ`, persistent ids, extensions) are an error, as is any opcode outside
//! the subset. Objects live in [`Objects`], an arena addressed by index, so a list a
//! file refers to a million times through the memo is stored once. A reader that only
//! needs a compact form of many small dicts hands an [`Absorb`] to [`decode`]: each
//! small dict is offered to it as its items are decoded, and a dict it takes is never
//! stored, so a multi-GB file of millions of records never holds them as dicts.
//!
//! Memory is bounded by the input: each opcode byte adds at most one object, the stack
//! and the memo hold at most one entry per opcode, and nothing recurses.

use std::collections::HashMap;

/// A decoded value: scalars inline, everything else an index into [`Objects`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// Python `None`.
    None,
    /// A `bool`.
    Bool(bool),
    /// An `int` that fits 64 bits signed.
    Int(i64),
    /// An `int` from 2^63 to 2^64 - 1 (PyTorch writes `uint64_t` fields such as an
    /// unknown frame's line, 2^64 - 1, as Python ints).
    Uint(u64),
    /// A `float`.
    Float(f64),
    /// A `str`: index into [`Objects::str`].
    Str(u32),
    /// A `list`: index into [`Objects::list`].
    List(u32),
    /// A `tuple`: index into [`Objects::tuple`].
    Tuple(u32),
    /// A `dict`: index into [`Objects::dict`].
    Dict(u32),
    /// A dict an [`Absorb`] took: its token.
    Taken(u32),
}

/// The strings, lists, tuples and dicts of one pickle.
#[derive(Debug, Default)]
pub struct Objects {
    strings: Vec<Box<str>>,
    lists: Vec<Vec<Value>>,
    tuples: Vec<Box<[Value]>>,
    /// Every dict's items, dict after dict.
    dict_items: Vec<(Value, Value)>,
    dicts: Vec<DictSlot>,
}

/// Where a dict's items are in [`Objects::dict_items`], or the token of a dict an
/// [`Absorb`] took (`len` = [`TAKEN`], `start` = the token).
#[derive(Clone, Copy, Debug, Default)]
struct DictSlot {
    start: u32,
    len: u32,
}

const TAKEN: u32 = u32::MAX;

/// CPython's pickler writes a dict's items in batches of this many: a batch this
/// long may be followed by more, so only a shorter one is a whole dict.
const BATCH: usize = 1000;

impl Objects {
    /// The text of string `id` ("" for an unknown id).
    pub fn str(&self, id: u32) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }

    /// The items of list `id` (empty for an unknown id).
    pub fn list(&self, id: u32) -> &[Value] {
        self.lists.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// The items of tuple `id` (empty for an unknown id).
    pub fn tuple(&self, id: u32) -> &[Value] {
        self.tuples.get(id as usize).map_or(&[], |t| t)
    }

    /// The `(key, value)` pairs of dict `id` in insertion order (a key set twice keeps
    /// both pairs; the later wins in [`Objects::get`]).
    pub fn dict(&self, id: u32) -> &[(Value, Value)] {
        match self.dicts.get(id as usize) {
            Some(slot) if slot.len != TAKEN => {
                let start = slot.start as usize;
                self.dict_items.get(start..start + slot.len as usize).unwrap_or(&[])
            }
            _ => &[],
        }
    }

    /// `value`, or [`Value::Taken`] when it is a dict an [`Absorb`] took.
    fn resolved(&self, value: Value) -> Value {
        match value {
            Value::Dict(id) => match self.dicts.get(id as usize) {
                Some(slot) if slot.len == TAKEN => Value::Taken(slot.start),
                _ => value,
            },
            other => other,
        }
    }

    /// The value under string key `key` in dict `id`.
    pub fn get(&self, id: u32, key: &str) -> Option<Value> {
        get_in(self, self.dict(id), key)
    }

    /// The text of `value` when it is a string.
    pub fn text(&self, value: Value) -> Option<&str> {
        match value {
            Value::Str(id) => Some(self.str(id)),
            _ => None,
        }
    }

    /// The items of `value` when it is a list or a tuple (empty otherwise).
    pub fn items(&self, value: Value) -> &[Value] {
        match value {
            Value::List(id) => self.list(id),
            Value::Tuple(id) => self.tuple(id),
            _ => &[],
        }
    }
}

/// The value under string key `key` among `pairs` (the last one set wins).
pub fn get_in(objects: &Objects, pairs: &[(Value, Value)], key: &str) -> Option<Value> {
    pairs.iter().rev().find(|(k, _)| matches!(k, Value::Str(s) if objects.str(*s) == key)).map(|(_, v)| *v)
}

/// A reader that takes dicts out of the arena as they are decoded.
pub trait Absorb {
    /// Offered each dict whose items are set in one go (`SETITEMS` or `DICT` on an
    /// empty dict, fewer than 1000 items: all a pickler writes of a small dict), with
    /// those items. `Ok(Some(token))` takes it: its items are never stored, and the
    /// lists it is appended to hold [`Value::Taken`]`(token)`; `Ok(None)` keeps it. An
    /// error stops the decoding.
    fn absorb(&mut self, objects: &Objects, pairs: &[(Value, Value)]) -> Result<Option<u32>, String>;

    /// A dict it took (its `token`) is appended to list `list`. `true`: the reader
    /// keeps track of it, and the list does not store it (millions of entries in one
    /// list would cost 16 bytes each); `false`: the list stores [`Value::Taken`].
    fn taken_appended(&mut self, list: u32, token: u32) -> bool {
        let _ = (list, token);
        false
    }

    /// After a dict is taken: a list it will never read again (a taken entry's own
    /// list of frames, once the reader has made it its stack), asked for until `None`.
    /// Its items are freed; it reads as empty from then on.
    fn finished_list(&mut self) -> Option<u32> {
        None
    }
}

/// An [`Absorb`] that takes nothing.
pub struct KeepAll;

impl Absorb for KeepAll {
    fn absorb(&mut self, _: &Objects, _: &[(Value, Value)]) -> Result<Option<u32>, String> {
        Ok(None)
    }
}

/// Why a pickle could not be decoded, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PickleError {
    /// Byte offset of the opcode.
    pub offset: u64,
    /// What was wrong.
    pub message: String,
}

/// Whether `head` starts like a binary pickle (`PROTO` 2 to 5).
pub fn is_pickle(head: &[u8]) -> bool {
    matches!(head, [0x80, 2..=5, ..])
}

/// Decodes a whole pickle: the objects and the value `STOP` returns.
pub fn decode(bytes: &[u8], absorb: &mut dyn Absorb) -> Result<(Objects, Value), PickleError> {
    decode_releasing(bytes, absorb, &|_| {})
}

/// Bytes decoded between two calls of [`decode_releasing`]'s `release`.
const RELEASE_EVERY_BYTES: usize = 16 << 20;

/// [`decode`], calling `release` with each range of bytes it is done with (every 16
/// MiB, and the rest at the end): nothing refers back to bytes, so a mapped file
/// need not stay resident.
pub fn decode_releasing(
    bytes: &[u8],
    absorb: &mut dyn Absorb,
    release: &dyn Fn(std::ops::Range<usize>),
) -> Result<(Objects, Value), PickleError> {
    let mut decoder =
        Decoder { bytes, pos: 0, objects: Objects::default(), stack: Vec::new(), marks: Vec::new(), pairs: Vec::new() };
    let mut memo = Memo::default();
    let mut released = 0;
    loop {
        if decoder.pos - released >= RELEASE_EVERY_BYTES {
            release(released..decoder.pos);
            released = decoder.pos;
        }
        let at = decoder.pos;
        let fail = |message: String| PickleError { offset: at as u64, message };
        let opcode = decoder.byte().map_err(fail)?;
        match decoder.step(opcode, &mut memo, absorb).map_err(fail)? {
            Flow::Next => {}
            Flow::Stop(value) => {
                release(released..decoder.pos);
                return Ok((decoder.objects, value));
            }
        }
    }
}

/// The memo: dense as protocol 4's `MEMOIZE` fills it, sparse for `BINPUT` indices
/// far ahead (a crafted index must not allocate its size). A dense slot takes 8
/// bytes (a file memoizes each of its millions of containers): the kind of value in
/// the top byte and an object's index below; numbers, which CPython never memoizes,
/// go to `numbers`.
#[derive(Default)]
struct Memo {
    dense: Vec<u64>,
    numbers: Vec<Value>,
    sparse: HashMap<u64, Value>,
}

/// The kinds of value a dense memo slot holds, in its top byte.
const SLOT_STR: u64 = 1;
const SLOT_LIST: u64 = 2;
const SLOT_TUPLE: u64 = 3;
const SLOT_DICT: u64 = 4;
const SLOT_TAKEN: u64 = 5;
const SLOT_NUMBER: u64 = 6;
const SLOT_NONE: u64 = 7;
const SLOT_FALSE: u64 = 8;
const SLOT_TRUE: u64 = 9;

impl Memo {
    fn put(&mut self, index: u64, value: Value) {
        match usize::try_from(index) {
            Ok(i) if i <= self.dense.len() => {
                let slot = self.slot(value);
                if i == self.dense.len() {
                    self.dense.push(slot);
                } else {
                    self.dense[i] = slot;
                }
            }
            _ => {
                self.sparse.insert(index, value);
            }
        }
    }

    fn slot(&mut self, value: Value) -> u64 {
        let (kind, id) = match value {
            Value::Str(id) => (SLOT_STR, id),
            Value::List(id) => (SLOT_LIST, id),
            Value::Tuple(id) => (SLOT_TUPLE, id),
            Value::Dict(id) => (SLOT_DICT, id),
            Value::Taken(id) => (SLOT_TAKEN, id),
            Value::None => (SLOT_NONE, 0),
            Value::Bool(false) => (SLOT_FALSE, 0),
            Value::Bool(true) => (SLOT_TRUE, 0),
            Value::Int(_) | Value::Uint(_) | Value::Float(_) => {
                self.numbers.push(value);
                (SLOT_NUMBER, u32::try_from(self.numbers.len() - 1).unwrap_or(u32::MAX))
            }
        };
        (kind << 56) | u64::from(id)
    }

    #[inline]
    fn get(&self, index: u64) -> Option<Value> {
        let dense = usize::try_from(index).ok().and_then(|i| self.dense.get(i)).copied();
        match dense {
            Some(slot) => {
                let id = (slot & u64::from(u32::MAX)) as u32;
                match slot >> 56 {
                    SLOT_STR => Some(Value::Str(id)),
                    SLOT_LIST => Some(Value::List(id)),
                    SLOT_TUPLE => Some(Value::Tuple(id)),
                    SLOT_DICT => Some(Value::Dict(id)),
                    SLOT_TAKEN => Some(Value::Taken(id)),
                    SLOT_NONE => Some(Value::None),
                    SLOT_FALSE => Some(Value::Bool(false)),
                    SLOT_TRUE => Some(Value::Bool(true)),
                    _ => self.numbers.get(id as usize).copied(),
                }
            }
            None => self.sparse.get(&index).copied(),
        }
    }

    /// [`Memo::get`], or why not.
    #[inline]
    fn value(&self, index: u64) -> Result<Value, String> {
        self.get(index).ok_or_else(|| undefined(index))
    }
}

#[cold]
fn undefined(index: u64) -> String {
    format!("memo entry {index} is not defined")
}

enum Flow {
    Next,
    Stop(Value),
}

struct Decoder<'a> {
    bytes: &'a [u8],
    pos: usize,
    objects: Objects,
    stack: Vec<Value>,
    /// Stack lengths at each `MARK`.
    marks: Vec<usize>,
    /// The pairs of the dict being set (reused from dict to dict).
    pairs: Vec<(Value, Value)>,
}

impl Decoder<'_> {
    /// Pushes `value`; the next opcode follows.
    #[inline(always)]
    fn pushed(&mut self, value: Value) -> Result<Flow, String> {
        self.stack.push(value);
        Ok(Flow::Next)
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.pos.checked_add(n).filter(|&end| end <= self.bytes.len()).ok_or_else(|| {
            format!(
                "the file ends inside an opcode's argument ({n} bytes needed, {} left)",
                self.bytes.len() - self.pos
            )
        })?;
        let slice = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(slice)
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.bytes.get(self.pos).ok_or("the file ends before the pickle's STOP opcode")?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    fn le(&mut self, n: usize) -> Result<u64, String> {
        Ok(self.take(n)?.iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// A length argument, checked against what is left of the file.
    fn length(&mut self, n: usize) -> Result<usize, String> {
        let len = self.le(n)?;
        usize::try_from(len)
            .ok()
            .filter(|&len| len <= self.bytes.len() - self.pos)
            .ok_or_else(|| format!("a length of {len} bytes runs past the end of the file"))
    }

    fn pop(&mut self) -> Result<Value, String> {
        if self.stack.len() <= self.floor() {
            return Err("an opcode pops from an empty stack".to_string());
        }
        self.stack.pop().ok_or_else(|| "an opcode pops from an empty stack".to_string())
    }

    fn top(&self) -> Result<Value, String> {
        self.stack.last().copied().ok_or_else(|| "an opcode reads an empty stack".to_string())
    }

    /// The lowest stack position the current mark leaves to pop.
    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn push_str(&mut self, raw: &[u8]) -> Value {
        let text = String::from_utf8_lossy(raw).into_owned().into_boxed_str();
        self.objects.strings.push(text);
        Value::Str((self.objects.strings.len() - 1) as u32)
    }

    fn new_list(&mut self, items: Vec<Value>) -> Value {
        self.objects.lists.push(items);
        Value::List((self.objects.lists.len() - 1) as u32)
    }

    fn new_tuple(&mut self, items: Vec<Value>) -> Value {
        self.objects.tuples.push(items.into_boxed_slice());
        Value::Tuple((self.objects.tuples.len() - 1) as u32)
    }

    fn new_dict(&mut self) -> Value {
        self.objects.dicts.push(DictSlot::default());
        Value::Dict((self.objects.dicts.len() - 1) as u32)
    }

    /// Where the values pushed since the last `MARK` start; the mark is removed.
    fn take_mark(&mut self) -> Result<usize, String> {
        let mark = self.marks.pop().ok_or("an opcode needs a MARK and there is none")?;
        Ok(mark.min(self.stack.len()))
    }

    /// The value just below position `from` of the stack (the container a marked
    /// group of values goes into).
    fn below(&self, from: usize) -> Result<Value, String> {
        from.checked_sub(1)
            .and_then(|i| self.stack.get(i))
            .copied()
            .ok_or_else(|| "an opcode reads an empty stack".to_string())
    }

    /// Appends the stack's values from `from` on to `list` (a dict an [`Absorb`]
    /// took as its token, unless the absorber keeps track of it), and removes them
    /// from the stack.
    fn append_from(&mut self, list: Value, from: usize, absorb: &mut dyn Absorb) -> Result<(), String> {
        let Value::List(id) = list else {
            return Err(format!("APPEND to a {} (only lists are supported)", kind(list)));
        };
        let objects = &mut self.objects;
        let target = objects.lists.get_mut(id as usize).ok_or("APPEND to an unknown list")?;
        for &value in &self.stack[from..] {
            match value {
                Value::Dict(dict) => match objects.dicts.get(dict as usize) {
                    Some(slot) if slot.len == TAKEN => {
                        if !absorb.taken_appended(id, slot.start) {
                            target.push(Value::Taken(slot.start));
                        }
                    }
                    _ => target.push(value),
                },
                other => target.push(other),
            }
        }
        self.stack.truncate(from);
        Ok(())
    }

    /// Sets the stack's key/value pairs from `from` on in `dict` (offering a whole
    /// small dict to `absorb` first), and removes them from the stack.
    fn set_items_from(&mut self, dict: Value, from: usize, absorb: &mut dyn Absorb) -> Result<(), String> {
        let Value::Dict(id) = dict else {
            return Err(format!("SETITEMS on a {} (only dicts are supported)", kind(dict)));
        };
        let flat = &self.stack[from..];
        if !flat.len().is_multiple_of(2) {
            return Err("SETITEMS with an odd number of keys and values".to_string());
        }
        let slot = *self.objects.dicts.get(id as usize).ok_or("SETITEMS on an unknown dict")?;
        if slot.len == TAKEN {
            return Err("SETITEMS on a dict already read whole".to_string());
        }
        // One buffer for every dict: millions of small dicts allocate nothing here.
        let mut pairs = std::mem::take(&mut self.pairs);
        pairs.clear();
        pairs.extend(flat.chunks_exact(2).map(|pair| (pair[0], self.objects.resolved(pair[1]))));
        self.stack.truncate(from);
        let taken = if slot.len == 0 && pairs.len() < BATCH { absorb.absorb(&self.objects, &pairs)? } else { None };
        if let Some(token) = taken {
            self.objects.dicts[id as usize] = DictSlot { start: token, len: TAKEN };
            while let Some(list) = absorb.finished_list() {
                if let Some(items) = self.objects.lists.get_mut(list as usize) {
                    *items = Vec::new();
                }
            }
            self.pairs = pairs;
            return Ok(());
        }
        let objects = &mut self.objects;
        let end = objects.dict_items.len();
        let mut start = slot.start as usize;
        if slot.len > 0 && start + slot.len as usize != end {
            // More items for a dict that is not the last one stored: move it to the end.
            let old = start..start + slot.len as usize;
            objects.dict_items.extend_from_within(old);
            start = end;
        } else if slot.len == 0 {
            start = end;
        }
        objects.dict_items.extend_from_slice(&pairs);
        self.pairs = pairs;
        let len = objects.dict_items.len() - start;
        let fits = |n: usize| u32::try_from(n).ok().filter(|&n| n != TAKEN);
        let (Some(start), Some(len)) = (fits(start), fits(len)) else {
            return Err("more than 4 billion dict items".to_string());
        };
        objects.dicts[id as usize] = DictSlot { start, len };
        Ok(())
    }

    fn step(&mut self, opcode: u8, memo: &mut Memo, absorb: &mut dyn Absorb) -> Result<Flow, String> {
        let value = match opcode {
            0x80 => {
                let protocol = self.byte()?;
                if !(2..=5).contains(&protocol) {
                    return Err(format!("pickle protocol {protocol} is not supported (2 to 5 are)"));
                }
                return Ok(Flow::Next);
            }
            0x95 => {
                self.take(8)?; // FRAME: a length hint.
                return Ok(Flow::Next);
            }
            b'.' => {
                let value = self.pop()?;
                return Ok(Flow::Stop(value));
            }
            b'(' => {
                self.marks.push(self.stack.len());
                return Ok(Flow::Next);
            }
            b'0' => {
                self.pop()?;
                return Ok(Flow::Next);
            }
            b'1' => {
                let from = self.take_mark()?;
                self.stack.truncate(from);
                return Ok(Flow::Next);
            }
            b'2' => self.top()?,
            b'N' => Value::None,
            0x88 => Value::Bool(true),
            0x89 => Value::Bool(false),
            // The opcodes of every trace entry push where they are decoded: through the
            // common push below, a value goes through memory first (6 M entries: 1.59 s
            // through it, 1.29 s without).
            b'J' => {
                let value = Value::Int(i64::from(self.le(4)? as u32 as i32));
                return self.pushed(value);
            }
            b'K' => {
                let value = Value::Int(self.le(1)? as i64);
                return self.pushed(value);
            }
            b'M' => {
                let value = Value::Int(self.le(2)? as i64);
                return self.pushed(value);
            }
            0x8a => {
                let n = self.length(1)?;
                let value = self.long(n)?;
                return self.pushed(value);
            }
            0x8b => {
                let n = self.length(4)?;
                self.long(n)?
            }
            b'G' => {
                let raw = self.take(8)?;
                let mut be = [0u8; 8];
                be.copy_from_slice(raw);
                Value::Float(f64::from_be_bytes(be))
            }
            0x8c | b'U' => {
                let n = self.length(1)?;
                let raw = self.take(n)?.to_vec();
                self.push_str(&raw)
            }
            b'X' | b'T' => {
                let n = self.length(4)?;
                let raw = self.take(n)?.to_vec();
                self.push_str(&raw)
            }
            0x8d => {
                let n = self.length(8)?;
                let raw = self.take(n)?.to_vec();
                self.push_str(&raw)
            }
            b']' => {
                let value = self.new_list(Vec::new());
                return self.pushed(value);
            }
            b'l' => {
                let from = self.take_mark()?;
                let list = self.new_list(Vec::new());
                self.append_from(list, from, absorb)?;
                list
            }
            b'a' => {
                let from = self
                    .stack
                    .len()
                    .checked_sub(1)
                    .filter(|&i| i >= self.floor())
                    .ok_or("APPEND with an empty stack")?;
                let list = self.below(from)?;
                self.append_from(list, from, absorb)?;
                return Ok(Flow::Next);
            }
            b'e' => {
                let from = self.take_mark()?;
                let list = self.below(from)?;
                self.append_from(list, from, absorb)?;
                return Ok(Flow::Next);
            }
            b'}' => {
                let value = self.new_dict();
                return self.pushed(value);
            }
            b'd' => {
                let from = self.take_mark()?;
                let dict = self.new_dict();
                self.set_items_from(dict, from, absorb)?;
                dict
            }
            b's' => {
                let from = self
                    .stack
                    .len()
                    .checked_sub(2)
                    .filter(|&i| i >= self.floor())
                    .ok_or("SETITEM with an empty stack")?;
                let dict = self.below(from)?;
                self.set_items_from(dict, from, absorb)?;
                return Ok(Flow::Next);
            }
            b'u' => {
                let from = self.take_mark()?;
                let dict = self.below(from)?;
                self.set_items_from(dict, from, absorb)?;
                return Ok(Flow::Next);
            }
            b')' => self.new_tuple(Vec::new()),
            0x85..=0x87 => {
                let n = usize::from(opcode - 0x84);
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.pop()?);
                }
                items.reverse();
                self.new_tuple(items)
            }
            b't' => {
                let from = self.take_mark()?;
                let items = self.stack.split_off(from);
                self.new_tuple(items)
            }
            0x94 => {
                let index = memo.dense.len() as u64;
                memo.put(index, self.top()?);
                return Ok(Flow::Next);
            }
            b'q' | b'r' => {
                let index = self.le(if opcode == b'q' { 1 } else { 4 })?;
                memo.put(index, self.top()?);
                return Ok(Flow::Next);
            }
            b'p' => {
                let index = self.decimal_line()?;
                memo.put(index, self.top()?);
                return Ok(Flow::Next);
            }
            b'h' => {
                let value = memo.value(self.le(1)?)?;
                return self.pushed(value);
            }
            b'j' => {
                let value = memo.value(self.le(4)?)?;
                return self.pushed(value);
            }
            b'g' => {
                let index = self.decimal_line()?;
                memo.value(index)?
            }
            b'c' | 0x93 | b'R' | b'b' | b'i' | b'o' | 0x81 | 0x92 | b'P' | b'Q' | 0x82..=0x84 => {
                return Err(format!(
                    "opcode {} names or calls Python code; mlprof never runs pickle code, and memory snapshots \
                     hold only dicts, lists, strings and numbers",
                    opcode_name(opcode)
                ));
            }
            other => return Err(format!("opcode {} is not supported", opcode_name(other))),
        };
        self.stack.push(value);
        Ok(Flow::Next)
    }

    /// `LONG1`/`LONG4`: a little-endian two's-complement integer of `n` bytes.
    #[inline]
    fn long(&mut self, n: usize) -> Result<Value, String> {
        // Up to 8 bytes (addresses, times: every entry has some), sign-extended.
        if (1..=8).contains(&n)
            && let Some(raw) = self.bytes.get(self.pos..self.pos + n)
        {
            let fill = if raw[n - 1] & 0x80 != 0 { 0xff } else { 0 };
            let mut buf = [fill; 8];
            buf[..n].copy_from_slice(raw);
            self.pos += n;
            return Ok(Value::Int(i64::from_le_bytes(buf)));
        }
        let raw = self.take(n)?;
        let Some(&last) = raw.last() else { return Ok(Value::Int(0)) };
        let negative = last & 0x80 != 0;
        let fill = if negative { 0xff } else { 0 };
        // Beyond 8 bytes only a sign byte may follow: 0 for an unsigned 64-bit value.
        let (low, high) = raw.split_at(n.min(8));
        if high.iter().any(|&b| b != fill) || high.len() > 1 {
            return Err(format!("an integer of {n} bytes does not fit 64 bits"));
        }
        let mut buf = [fill; 8];
        buf[..low.len()].copy_from_slice(low);
        let bits = u64::from_le_bytes(buf);
        let top_set = bits >> 63 == 1;
        Ok(match (high.is_empty(), negative, top_set) {
            (true, _, _) => Value::Int(bits as i64),
            (false, false, true) => Value::Uint(bits),
            (false, false, false) => Value::Int(bits as i64),
            (false, true, true) => Value::Int(bits as i64),
            (false, true, false) => return Err(format!("an integer of {n} bytes does not fit 64 bits")),
        })
    }

    /// The decimal argument of protocol 0's `PUT`/`GET`, up to a newline.
    fn decimal_line(&mut self) -> Result<u64, String> {
        let rest = &self.bytes[self.pos..];
        let end = rest.iter().position(|&b| b == b'\n').ok_or("PUT/GET without its newline")?;
        let text = std::str::from_utf8(&rest[..end]).map_err(|_| "PUT/GET index is not text")?;
        let index = text.trim().parse::<u64>().map_err(|_| format!("PUT/GET index {text:?} is not a number"))?;
        self.pos += end + 1;
        Ok(index)
    }
}

fn kind(value: Value) -> &'static str {
    match value {
        Value::None => "None",
        Value::Bool(_) => "bool",
        Value::Int(_) | Value::Uint(_) => "int",
        Value::Float(_) => "float",
        Value::Str(_) => "str",
        Value::List(_) => "list",
        Value::Tuple(_) => "tuple",
        Value::Dict(_) | Value::Taken(_) => "dict",
    }
}

fn opcode_name(opcode: u8) -> String {
    let name = match opcode {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        0x82..=0x84 => "EXT",
        b'B' | b'C' | 0x8e => "BYTES",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => return format!("0x{opcode:02x}"),
    };
    format!("{name} (0x{opcode:02x})")
}

#[cfg(test)]
mod tests;

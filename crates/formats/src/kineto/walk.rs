//! The fast path of the Kineto reader: the top level of the document is walked by hand
//! and the `traceEvents` array is read one event at a time, each event by
//! [`super::fast`]'s scanner or, when it declines, by its own small serde_json
//! deserializer, so the walker knows the byte position after every event. That position lets it (1) hand the bytes it is done with back to the
//! operating system ([`Release`]) and (2) read the array in several chunks at once.
//!
//! The one design decision to know: **chunks are speculative and verified**. A chunk
//! boundary is found by a byte search near the nominal split point (a `{` after `}`,
//! `,` and whitespace) without parsing, so it may lie inside a string or a nested value.
//! Chunk 0 starts at the document start and must stop after a whole event exactly at
//! boundary 1; chunk `i` is read from boundary `i` as an array element and must stop
//! exactly at boundary `i + 1`; the last chunk must end the array and the document.
//! Chunk 0's parse states are the real ones, so by induction every boundary that all
//! chunks accept is a real element boundary and the chunks read exactly the events one
//! pass would read, in the same order; [`Reader::append`] then merges their readers.
//! Anything else (a bogus boundary, bad input, a duplicate `traceEvents`) yields no
//! result and the caller reads again with fewer chunks or sequentially, so results and
//! errors (with their line and column) are always those of the sequential parse.

use crate::input::{RELEASE_STEP_BYTES, Release};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::fast::Scanner;
use super::parse::{Fields, Reader, Text};

/// Why a walk gave no result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A chunk did not end exactly at its boundary: the boundary was not a real one.
    Misplaced,
    /// The input is not what this walker reads (bad JSON, a bad event, an unusual
    /// top level): the sequential parse decides.
    Invalid,
}

type Walk<T> = Result<T, Failure>;

/// One chunk's reader state and position.
struct Walker<'de, 'a> {
    bytes: &'de [u8],
    pos: usize,
    reader: Reader,
    release: Option<Release<'a>>,
    released: usize,
    scanner: Scanner,
    /// The fields of the event being read, reused from one event to the next.
    fields: Fields<'de>,
}

impl<'de, 'a> Walker<'de, 'a> {
    fn new(bytes: &'de [u8], pos: usize, release: Option<Release<'a>>) -> Self {
        Walker {
            bytes,
            pos,
            reader: Reader::default(),
            release,
            released: pos,
            scanner: Scanner::default(),
            fields: Fields::default(),
        }
    }

    /// Skips JSON whitespace.
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    /// Consumes `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let found = self.bytes.get(self.pos) == Some(&byte);
        self.pos += usize::from(found);
        found
    }

    /// Reads one JSON value (after optional whitespace) with serde_json.
    fn value<T: Deserialize<'de>>(&mut self) -> Walk<T> {
        let rest = self.bytes.get(self.pos..).ok_or(Failure::Invalid)?;
        let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<T>();
        let value = stream.next().ok_or(Failure::Invalid)?.map_err(|_| Failure::Invalid)?;
        self.pos += stream.byte_offset();
        Ok(value)
    }

    /// Reads the document up to and including the `[` of the events array.
    fn prefix(&mut self) -> Walk<()> {
        self.ws();
        if self.eat(b'[') {
            self.reader.bare_array = true;
            return Ok(());
        }
        if !self.eat(b'{') {
            return Err(Failure::Invalid);
        }
        loop {
            let Text(key) = self.value()?;
            self.ws();
            if !self.eat(b':') {
                return Err(Failure::Invalid);
            }
            if key == "traceEvents" {
                self.ws();
                return if self.eat(b'[') { Ok(()) } else { Err(Failure::Invalid) };
            }
            let raw: &'de RawValue = self.value()?;
            self.reader.top_level.push((key.into_owned(), raw.get().to_string()));
            self.ws();
            if !self.eat(b',') {
                return Err(Failure::Invalid);
            }
        }
    }

    /// Reads events from an element start (or, with `first`, from just after the `[`)
    /// until `stop` (an element start), or to the end of the array when `stop` is None.
    fn events(&mut self, first: bool, stop: Option<usize>) -> Walk<()> {
        if first {
            self.ws();
            if self.eat(b']') {
                return if stop.is_some() { Err(Failure::Misplaced) } else { Ok(()) };
            }
        }
        loop {
            if let Some(stop) = stop {
                if self.pos == stop {
                    self.release_consumed(true);
                    return Ok(());
                }
                if self.pos > stop {
                    return Err(Failure::Misplaced);
                }
            }
            let finished = match self.scanner.event(self.bytes, self.pos, &mut self.fields) {
                Some(end) => {
                    self.pos = end;
                    self.reader.finish_event(&self.fields)
                }
                None => {
                    let fields: Fields<'de> = self.value()?;
                    self.reader.finish_event(&fields)
                }
            };
            finished.map_err(|_| Failure::Invalid)?;
            self.release_consumed(false);
            self.ws();
            if self.eat(b',') {
                self.ws();
            } else if self.eat(b']') {
                break;
            } else {
                return Err(Failure::Invalid);
            }
        }
        if stop.is_some() { Err(Failure::Misplaced) } else { Ok(()) }
    }

    /// Reads the rest of the document after the events array.
    fn tail(&mut self) -> Walk<()> {
        if !self.reader.bare_array {
            loop {
                self.ws();
                if self.eat(b'}') {
                    break;
                }
                if !self.eat(b',') {
                    return Err(Failure::Invalid);
                }
                let Text(key) = self.value()?;
                if key == "traceEvents" {
                    // A second events array: rare enough to leave to the sequential parse.
                    return Err(Failure::Invalid);
                }
                self.ws();
                if !self.eat(b':') {
                    return Err(Failure::Invalid);
                }
                let raw: &'de RawValue = self.value()?;
                self.reader.top_level.push((key.into_owned(), raw.get().to_string()));
            }
        }
        self.ws();
        self.release_consumed(true);
        if self.pos == self.bytes.len() { Ok(()) } else { Err(Failure::Invalid) }
    }

    /// Tells the [`Release`] callback about the bytes read since its last call, every
    /// [`RELEASE_STEP_BYTES`] or when `all`.
    #[inline]
    fn release_consumed(&mut self, all: bool) {
        if let Some(release) = self.release
            && (all || self.pos - self.released >= RELEASE_STEP_BYTES)
            && self.pos > self.released
        {
            release(self.released..self.pos);
            self.released = self.pos;
        }
    }
}

/// Reads the whole document in one walk on the calling thread.
pub(crate) fn walk_whole(bytes: &[u8], release: Option<Release<'_>>) -> Walk<Reader> {
    let mut w = Walker::new(bytes, 0, release);
    w.prefix()?;
    w.events(true, None)?;
    w.tail()?;
    Ok(w.reader)
}

/// Reads the document in (up to) `chunks` chunks on as many threads, each at least
/// `min_chunk_bytes` long, and merges them. Falls back to one walk when a boundary
/// turns out not to be an element boundary; `Err` when even that fails.
pub(crate) fn walk_chunked(
    bytes: &[u8],
    chunks: usize,
    min_chunk_bytes: usize,
    release: Option<Release<'_>>,
) -> Walk<Reader> {
    let starts = boundaries(bytes, chunks, min_chunk_bytes);
    if starts.is_empty() {
        return walk_whole(bytes, release);
    }
    match walk_at(bytes, &starts, release) {
        Ok(reader) => Ok(reader),
        Err(Failure::Misplaced) => walk_whole(bytes, release),
        Err(Failure::Invalid) => Err(Failure::Invalid),
    }
}

/// Reads the chunks that start at `starts` (after the document's own start) in
/// parallel and merges them in order.
pub(crate) fn walk_at(bytes: &[u8], starts: &[usize], release: Option<Release<'_>>) -> Walk<Reader> {
    let chunk = |i: usize| -> Walk<Reader> {
        let stop = starts.get(i).copied();
        if i == 0 {
            let mut w = Walker::new(bytes, 0, release);
            w.prefix()?;
            w.events(true, stop)?;
            return Ok(w.reader);
        }
        let start = starts.get(i - 1).copied().ok_or(Failure::Misplaced)?;
        let mut w = Walker::new(bytes, start, release);
        // A later chunk's parse state is a guess: any failure may mean that its start
        // was not an element boundary.
        w.events(false, stop).map_err(|_| Failure::Misplaced)?;
        if stop.is_none() {
            w.tail().map_err(|_| Failure::Misplaced)?;
        }
        Ok(w.reader)
    };
    let chunk = &chunk;
    let results: Vec<Walk<Reader>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..=starts.len()).map(|i| scope.spawn(move || chunk(i))).collect();
        let mut results = vec![chunk(0)];
        results.extend(handles.into_iter().map(|h| h.join().unwrap_or(Err(Failure::Invalid))));
        results
    });
    let mut results = results.into_iter();
    let mut merged = results.next().ok_or(Failure::Invalid)??;
    // A chunk 0 failure is a real one; a later chunk's makes its boundary suspect.
    let later: Vec<Reader> = results.collect::<Walk<Vec<_>>>()?;
    for reader in later {
        merged.append(reader).map_err(|_| Failure::Invalid)?;
    }
    Ok(merged)
}

/// Candidate chunk starts: for each of the `chunks - 1` nominal split points, the next
/// `{` that follows `}`, whitespace, `,` and whitespace (preferring whitespace with a
/// line break, as Kineto writes one event per line group), strictly increasing.
pub(crate) fn boundaries(bytes: &[u8], chunks: usize, min_chunk_bytes: usize) -> Vec<usize> {
    let chunks = chunks.min(bytes.len() / min_chunk_bytes.max(1));
    let mut starts: Vec<usize> = Vec::new();
    for i in 1..chunks {
        let nominal = bytes.len() / chunks * i;
        let from = nominal.max(starts.last().map_or(0, |&s| s + 1));
        if let Some(start) = find_boundary(bytes, from) {
            starts.push(start);
        }
    }
    starts
}

/// How far past the nominal point a boundary with a line break is looked for before
/// any boundary is accepted.
const LINE_BREAK_WINDOW_BYTES: usize = 1 << 20;

/// The first candidate element start at or after `from` (see [`boundaries`]).
fn find_boundary(bytes: &[u8], from: usize) -> Option<usize> {
    let mut first_any = None;
    let mut at = from;
    while let Some(close) = bytes.get(at..)?.iter().position(|&b| b == b'}').map(|p| at + p) {
        at = close + 1;
        let mut i = close + 1;
        let mut line_break = false;
        let mut comma = false;
        while let Some(&b) = bytes.get(i) {
            match b {
                b'\n' | b'\r' => line_break = true,
                b' ' | b'\t' => {}
                b',' if !comma => comma = true,
                _ => break,
            }
            i += 1;
        }
        if !comma || bytes.get(i) != Some(&b'{') {
            continue;
        }
        if line_break {
            return Some(i);
        }
        first_any.get_or_insert(i);
        if close - from > LINE_BREAK_WINDOW_BYTES {
            break;
        }
    }
    first_any
}

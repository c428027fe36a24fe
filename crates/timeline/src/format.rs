//! The index file: a header, the parts (one table or column each), a directory.
//!
//! ```text
//! offset 0   header (64 bytes)
//!            magic "MLPTLIDX" · format version u32 · header length u32 · file length u64
//!            · checksum u64 · directory offset u64 · directory entries u32 · zeros
//! 64 …       parts, each starting at a multiple of 8, zero-padded
//! …          directory: per part (part id u32, 0 u32, offset u64, length u64)
//! ```
//!
//! Everything is little-endian whatever the machine, integers only. The checksum covers
//! the header (with the checksum field zeroed) and every byte after it, so a
//! truncated, partly written or damaged file is refused before any table is read; the
//! tables' cross references are checked after that ([`crate::index`]). The one design
//! decision to know: columns are read in place from the mapping, never deserialised,
//! so opening costs one checksum pass and no allocation proportional to the events.

use std::io::{self, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::Path;

use crate::builder::BuiltIndex;
use crate::checksum::{Checksum, checksum};
use crate::column::{Col, Le, encode_all};
use crate::error::CacheError;
use crate::key::CacheKey;

/// The first eight bytes of every index file.
pub(crate) const MAGIC: [u8; 8] = *b"MLPTLIDX";
/// Version of the layout below; files of another version are rebuilt.
pub const FORMAT_VERSION: u32 = 1;
/// Length of the fixed header.
pub(crate) const HEADER_LEN: usize = 64;
const CHECKSUM_AT: Range<usize> = 24..32;
const DIRECTORY_ENTRY_LEN: usize = 24;

/// The parts of the file, by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// The cache key: what the index was built from.
    Key = 0,
    /// Counts and the time span ([`SUMMARY_FIELDS`] u64).
    Summary,
    /// `names + 1` u64 offsets into `NameBytes`.
    NameOffsets,
    /// The event names, UTF-8, back to back.
    NameBytes,
    /// Section and track names, UTF-8, back to back.
    Strings,
    /// Per section: name offset, name length, kind, first track, track count (u64).
    Sections,
    /// Per track: name offset, name length, section, first run, run count, first event,
    /// event count (u64).
    Tracks,
    /// Per run: first event, event count, first level, level count (u64).
    Runs,
    /// Per level: bucket width (ps, i64), first group, group count (u64).
    Levels,
    /// Per group: its first event id (u32).
    GroupFirst,
    /// Per group: its event count (u32).
    GroupCount,
    /// Per group: id of its longest event but the last (u32).
    GroupLongest,
    /// Per event: start, ps (i64).
    Start,
    /// Per event: duration, ps (i64).
    Duration,
    /// Per event: name id (u32).
    Name,
    /// Per event: the caller's source reference (u64).
    Source,
    /// `names + 1` u64 offsets into `Postings`.
    PostingOffsets,
    /// Event ids per name, in time order (u32).
    Postings,
    /// Flow sources, flows sorted by (from, to) (u32).
    FlowFromSource,
    /// Flow targets in the same order (u32).
    FlowFromTarget,
    /// Flow targets, flows sorted by (to, from) (u32).
    FlowToTarget,
    /// Flow sources in the same order (u32).
    FlowToSource,
}

/// Number of parts.
pub(crate) const PART_COUNT: usize = 22;
const ALL_PARTS: [Part; PART_COUNT] = [
    Part::Key,
    Part::Summary,
    Part::NameOffsets,
    Part::NameBytes,
    Part::Strings,
    Part::Sections,
    Part::Tracks,
    Part::Runs,
    Part::Levels,
    Part::GroupFirst,
    Part::GroupCount,
    Part::GroupLongest,
    Part::Start,
    Part::Duration,
    Part::Name,
    Part::Source,
    Part::PostingOffsets,
    Part::Postings,
    Part::FlowFromSource,
    Part::FlowFromTarget,
    Part::FlowToTarget,
    Part::FlowToSource,
];

/// u64 fields per section, track, run and level record.
pub(crate) const SECTION_FIELDS: usize = 5;
pub(crate) const TRACK_FIELDS: usize = 7;
pub(crate) const RUN_FIELDS: usize = 4;
pub(crate) const LEVEL_FIELDS: usize = 3;

/// The summary part, field by field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    pub(crate) events: u64,
    pub(crate) names: u64,
    pub(crate) sections: u64,
    pub(crate) tracks: u64,
    pub(crate) runs: u64,
    pub(crate) levels: u64,
    pub(crate) groups: u64,
    pub(crate) flows: u64,
    /// Earliest start and latest end (ps); (0, 0) without events.
    pub(crate) span_ps: (i64, i64),
}

/// u64 fields of the summary.
pub(crate) const SUMMARY_FIELDS: usize = 10;

impl Summary {
    fn of(built: &BuiltIndex) -> Summary {
        Summary {
            events: built.start_ps.len() as u64,
            names: built.names.len() as u64,
            sections: built.sections.len() as u64,
            tracks: built.tracks.len() as u64,
            runs: built.runs.len() as u64,
            levels: built.levels.len() as u64,
            groups: built.group_first.len() as u64,
            flows: built.flows_by_from.len() as u64,
            span_ps: built.span_ps.unwrap_or((0, 0)),
        }
    }

    fn fields(&self) -> [u64; SUMMARY_FIELDS] {
        [
            self.events,
            self.names,
            self.sections,
            self.tracks,
            self.runs,
            self.levels,
            self.groups,
            self.flows,
            self.span_ps.0 as u64,
            self.span_ps.1 as u64,
        ]
    }

    fn from_fields(f: [u64; SUMMARY_FIELDS]) -> Summary {
        Summary {
            events: f[0],
            names: f[1],
            sections: f[2],
            tracks: f[3],
            runs: f[4],
            levels: f[5],
            groups: f[6],
            flows: f[7],
            span_ps: (f[8] as i64, f[9] as i64),
        }
    }

    /// Expected byte length of `part`, when fixed by the counts.
    fn part_len(&self, part: Part) -> Option<u64> {
        let n = |count: u64, width: u64| count.checked_mul(width);
        match part {
            Part::Key | Part::NameBytes | Part::Strings => None,
            Part::Summary => Some(SUMMARY_FIELDS as u64 * 8),
            Part::NameOffsets | Part::PostingOffsets => n(self.names.checked_add(1)?, 8),
            Part::Sections => n(self.sections, SECTION_FIELDS as u64 * 8),
            Part::Tracks => n(self.tracks, TRACK_FIELDS as u64 * 8),
            Part::Runs => n(self.runs, RUN_FIELDS as u64 * 8),
            Part::Levels => n(self.levels, LEVEL_FIELDS as u64 * 8),
            Part::GroupFirst | Part::GroupCount | Part::GroupLongest => n(self.groups, 4),
            Part::Start | Part::Duration | Part::Source => n(self.events, 8),
            Part::Name | Part::Postings => n(self.events, 4),
            Part::FlowFromSource | Part::FlowFromTarget | Part::FlowToTarget | Part::FlowToSource => n(self.flows, 4),
        }
    }
}

/// Where each part lies in a validated file.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    parts: [Range<usize>; PART_COUNT],
    /// The summary part, decoded.
    pub(crate) summary: Summary,
}

impl Layout {
    /// The bytes of `part`.
    pub(crate) fn part<'a>(&self, bytes: &'a [u8], part: Part) -> &'a [u8] {
        bytes.get(self.parts[part as usize].clone()).unwrap_or(&[])
    }
}

/// A writer that checksums what goes through it and counts the bytes.
struct Hashing<W> {
    inner: W,
    sum: Checksum,
    written: u64,
}

impl<W: Write> Hashing<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)?;
        self.sum.update(bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn pad_to_8(&mut self) -> io::Result<()> {
        let pad = (8 - self.written % 8) % 8;
        self.put(&[0u8; 8][..pad as usize])
    }
}

/// Writes a part made of values of one type, encoding in bounded chunks.
fn put_column<W: Write, T: Le>(out: &mut Hashing<W>, values: &[T], buf: &mut Vec<u8>) -> io::Result<()> {
    for chunk in values.chunks((1 << 20) / T::SIZE) {
        buf.clear();
        encode_all(chunk, buf);
        out.put(buf)?;
    }
    Ok(())
}

/// Writes `built` with `key` as an index file to `out`.
pub(crate) fn write_index<W: Write + Seek>(built: &BuiltIndex, key: &CacheKey, out: W) -> io::Result<()> {
    let mut out = Hashing { inner: out, sum: Checksum::default(), written: 0 };
    out.inner.write_all(&[0u8; HEADER_LEN])?;
    out.written = HEADER_LEN as u64;
    let tables = SmallTables::of(built);
    let mut directory: Vec<(Part, u64, u64)> = Vec::with_capacity(PART_COUNT);
    let mut buf = Vec::new();
    for part in ALL_PARTS {
        let at = out.written;
        write_part(&mut out, part, built, key, &tables, &mut buf)?;
        directory.push((part, at, out.written - at));
        out.pad_to_8()?;
    }
    let directory_at = out.written;
    for (part, at, len) in &directory {
        buf.clear();
        (*part as u32).encode(&mut buf);
        0u32.encode(&mut buf);
        at.encode(&mut buf);
        len.encode(&mut buf);
        out.put(&buf)?;
    }
    let file_len = out.written;
    let body_sum = out.sum.finish();
    let mut header = header_bytes(file_len, directory_at, directory.len() as u32);
    let sum = full_checksum(&header, body_sum);
    header[CHECKSUM_AT].copy_from_slice(&sum.to_le_bytes());
    let mut inner = out.inner;
    inner.seek(SeekFrom::Start(0))?;
    inner.write_all(&header)?;
    inner.flush()
}

/// The parts of an index file that are encoded from the built index before writing:
/// the summary, the records of the small tables, and the names.
struct SmallTables {
    summary: Summary,
    /// Section and track names, which the records point into.
    strings: Vec<u8>,
    sections: Vec<u64>,
    tracks: Vec<u64>,
    runs: Vec<u64>,
    levels: Vec<u64>,
    /// Start of each event name in `name_bytes`, plus the end.
    name_offsets: Vec<u64>,
    name_bytes: Vec<u8>,
}

impl SmallTables {
    fn of(built: &BuiltIndex) -> SmallTables {
        let mut strings = Vec::new();
        let mut string = |text: &str| {
            let at = strings.len() as u64;
            strings.extend_from_slice(text.as_bytes());
            [at, text.len() as u64]
        };
        let sections: Vec<u64> = built
            .sections
            .iter()
            .flat_map(|s| {
                let [at, len] = string(&s.name);
                [at, len, s.kind.code(), s.first_track, s.track_count]
            })
            .collect();
        let tracks: Vec<u64> = built
            .tracks
            .iter()
            .flat_map(|t| {
                let [at, len] = string(&t.name);
                [at, len, t.section, t.first_run, t.run_count, t.first_event, t.event_count]
            })
            .collect();
        let runs: Vec<u64> =
            built.runs.iter().flat_map(|r| [r.first_event, r.event_count, r.first_level, r.level_count]).collect();
        let levels: Vec<u64> =
            built.levels.iter().flat_map(|l| [l.width_ps as u64, l.first_group, l.group_count]).collect();
        let mut name_offsets = Vec::with_capacity(built.names.len() + 1);
        let mut name_bytes = Vec::new();
        name_offsets.push(0u64);
        for name in &built.names {
            name_bytes.extend_from_slice(name.as_bytes());
            name_offsets.push(name_bytes.len() as u64);
        }
        SmallTables { summary: Summary::of(built), strings, sections, tracks, runs, levels, name_offsets, name_bytes }
    }
}

/// Writes the content of `part` (without padding).
fn write_part<W: Write>(
    out: &mut Hashing<W>,
    part: Part,
    built: &BuiltIndex,
    key: &CacheKey,
    tables: &SmallTables,
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    let column = |pairs: &[(u32, u32)], first: bool| -> Vec<u32> {
        pairs.iter().map(|&(a, b)| if first { a } else { b }).collect()
    };
    match part {
        Part::Key => out.put(&key.encode()),
        Part::Summary => put_column(out, &tables.summary.fields(), buf),
        Part::NameOffsets => put_column(out, &tables.name_offsets, buf),
        Part::NameBytes => out.put(&tables.name_bytes),
        Part::Strings => out.put(&tables.strings),
        Part::Sections => put_column(out, &tables.sections, buf),
        Part::Tracks => put_column(out, &tables.tracks, buf),
        Part::Runs => put_column(out, &tables.runs, buf),
        Part::Levels => put_column(out, &tables.levels, buf),
        Part::GroupFirst => put_column(out, &built.group_first, buf),
        Part::GroupCount => put_column(out, &built.group_count, buf),
        Part::GroupLongest => put_column(out, &built.group_longest, buf),
        Part::Start => put_column(out, &built.start_ps, buf),
        Part::Duration => put_column(out, &built.dur_ps, buf),
        Part::Name => put_column(out, &built.name, buf),
        Part::Source => put_column(out, &built.source, buf),
        Part::PostingOffsets => put_column(out, &built.posting_offsets, buf),
        Part::Postings => put_column(out, &built.postings, buf),
        Part::FlowFromSource => put_column(out, &column(&built.flows_by_from, true), buf),
        Part::FlowFromTarget => put_column(out, &column(&built.flows_by_from, false), buf),
        Part::FlowToTarget => put_column(out, &column(&built.flows_by_to, true), buf),
        Part::FlowToSource => put_column(out, &column(&built.flows_by_to, false), buf),
    }
}

/// The header with a zero checksum.
fn header_bytes(file_len: u64, directory_at: u64, entries: u32) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[0..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    header[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    header[16..24].copy_from_slice(&file_len.to_le_bytes());
    header[32..40].copy_from_slice(&directory_at.to_le_bytes());
    header[40..44].copy_from_slice(&entries.to_le_bytes());
    header
}

/// The file checksum: the header with its checksum field zeroed, then the body's sum.
fn full_checksum(header_zeroed: &[u8; HEADER_LEN], body_sum: u64) -> u64 {
    let mut sum = Checksum::default();
    sum.update(header_zeroed);
    sum.update(&body_sum.to_le_bytes());
    sum.finish()
}

/// Rewrites the checksum of `bytes` (a whole file) to match its content, so that a
/// deliberately changed file reaches the tables' own checks; shorter than a header:
/// nothing to do.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn reseal(bytes: &mut [u8]) {
    if bytes.len() < HEADER_LEN {
        return;
    }
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&bytes[..HEADER_LEN]);
    header[CHECKSUM_AT].fill(0);
    let sum = full_checksum(&header, checksum(&bytes[HEADER_LEN..]));
    bytes[CHECKSUM_AT].copy_from_slice(&sum.to_le_bytes());
}

/// For the fuzzer: makes the header of `bytes` valid (magic, version, header and file
/// length) and reseals the checksum, so mutated files get past the cheap checks and
/// exercise the directory and table validation.
#[cfg(feature = "fuzzing")]
pub(crate) fn make_plausible(bytes: &mut [u8]) {
    if bytes.len() < HEADER_LEN {
        return;
    }
    bytes[0..8].copy_from_slice(&MAGIC);
    bytes[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    let len = bytes.len() as u64;
    bytes[16..24].copy_from_slice(&len.to_le_bytes());
    reseal(bytes);
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    Col::<u32>::new(bytes.get(at..at + 4).unwrap_or(&[])).at(0)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    Col::<u64>::new(bytes.get(at..at + 8).unwrap_or(&[])).at(0)
}

/// Checks the header, length, checksum and directory of a whole file and finds its
/// parts; the key is returned for the caller to compare.
pub(crate) fn parse_layout(bytes: &[u8], path: &Path) -> Result<(Layout, CacheKey), CacheError> {
    let corrupt = |what: &str| CacheError::Corrupt { path: path.to_path_buf(), what: what.to_string() };
    if bytes.len() < HEADER_LEN || bytes[0..8] != MAGIC {
        return Err(CacheError::NotAnIndex { path: path.to_path_buf() });
    }
    let version = u32_at(bytes, 8);
    if version != FORMAT_VERSION {
        return Err(CacheError::Version { path: path.to_path_buf(), found: version, expected: FORMAT_VERSION });
    }
    if u32_at(bytes, 12) as usize != HEADER_LEN {
        return Err(corrupt("header length"));
    }
    let file_len = u64_at(bytes, 16);
    if file_len != bytes.len() as u64 {
        return Err(CacheError::Truncated { path: path.to_path_buf(), expected: file_len, actual: bytes.len() as u64 });
    }
    let (directory_at, entries) = (u64_at(bytes, 32), u32_at(bytes, 40) as usize);
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&bytes[..HEADER_LEN]);
    header[CHECKSUM_AT].fill(0);
    if full_checksum(&header, checksum(&bytes[HEADER_LEN..])) != u64_at(bytes, CHECKSUM_AT.start) {
        return Err(CacheError::Checksum { path: path.to_path_buf() });
    }
    if entries != PART_COUNT {
        return Err(corrupt("directory size"));
    }
    let directory = usize::try_from(directory_at)
        .ok()
        .and_then(|at| bytes.get(at..at.checked_add(entries * DIRECTORY_ENTRY_LEN)?))
        .ok_or_else(|| corrupt("directory out of the file"))?;
    let mut parts: [Range<usize>; PART_COUNT] = std::array::from_fn(|_| 0..0);
    for (i, part) in ALL_PARTS.iter().enumerate() {
        let entry = &directory[i * DIRECTORY_ENTRY_LEN..];
        let (id, at, len) = (u32_at(entry, 0), u64_at(entry, 8), u64_at(entry, 16));
        if id != *part as u32 || at % 8 != 0 || at < HEADER_LEN as u64 {
            return Err(corrupt("directory entry"));
        }
        let end =
            at.checked_add(len).filter(|&end| end <= directory_at).ok_or_else(|| corrupt("part out of the file"))?;
        parts[i] = at as usize..end as usize;
    }
    let summary_bytes = &bytes[parts[Part::Summary as usize].clone()];
    let summary_col = Col::<u64>::new(summary_bytes);
    if summary_bytes.len() != SUMMARY_FIELDS * 8 {
        return Err(corrupt("summary size"));
    }
    let summary = Summary::from_fields(std::array::from_fn(|i| summary_col.at(i)));
    for part in ALL_PARTS {
        let len = parts[part as usize].len() as u64;
        if let Some(expected) = summary.part_len(part)
            && len != expected
        {
            return Err(corrupt(&format!("{part:?} holds {len} bytes, expected {expected}")));
        }
    }
    let key = CacheKey::decode(&bytes[parts[Part::Key as usize].clone()]).ok_or_else(|| corrupt("cache key"))?;
    Ok((Layout { parts, summary }, key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{SectionKind, TimelineBuilder};
    use crate::index::TimelineIndex;

    fn bytes() -> Vec<u8> {
        let mut b = TimelineBuilder::new();
        let s = b.section("/host:CPU", SectionKind::Host);
        let t0 = b.track(s, "a").expect("track");
        let t1 = b.track(s, "b").expect("track");
        let n = b.name("e");
        let from = b.event(t0, 0, 10, n, 0).expect("event");
        let to = b.event(t1, 5, 10, n, 0).expect("event");
        b.flow(from, to);
        b.finish().expect("finish").to_bytes(&CacheKey::default())
    }

    fn patch_u64(bytes: &mut [u8], part: Part, field: usize, value: u64) {
        let (layout, _) = parse_layout(bytes, Path::new("t")).expect("layout");
        let at = layout.parts[part as usize].start + field * 8;
        bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
        reseal(bytes);
    }

    fn patch_u32(bytes: &mut [u8], part: Part, field: usize, value: u32) {
        let (layout, _) = parse_layout(bytes, Path::new("t")).expect("layout");
        let at = layout.parts[part as usize].start + field * 4;
        bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
        reseal(bytes);
    }

    #[test]
    fn inconsistent_tables_are_refused_even_with_a_valid_checksum() {
        let good = bytes();
        assert!(TimelineIndex::from_bytes(good.clone()).is_ok());
        type Patch = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(&str, Patch)> = vec![
            ("section kind", Box::new(|b| patch_u64(b, Part::Sections, 2, 7))),
            ("section name", Box::new(|b| patch_u64(b, Part::Sections, 1, 1 << 40))),
            ("track events", Box::new(|b| patch_u64(b, Part::Tracks, TRACK_FIELDS + 5, 0))),
            ("track section", Box::new(|b| patch_u64(b, Part::Tracks, 2, 3))),
            ("run size", Box::new(|b| patch_u64(b, Part::Runs, 1, 9))),
            ("event count", Box::new(|b| patch_u64(b, Part::Summary, 0, 3))),
            ("name offsets", Box::new(|b| patch_u64(b, Part::NameOffsets, 1, 99))),
            ("flow target", Box::new(|b| patch_u32(b, Part::FlowFromTarget, 0, 9))),
            ("posting offsets", Box::new(|b| patch_u64(b, Part::PostingOffsets, 1, 5))),
        ];
        for (what, patch) in cases {
            let mut damaged = good.clone();
            patch(&mut damaged);
            let result = TimelineIndex::from_bytes(damaged);
            assert!(matches!(result, Err(CacheError::Corrupt { .. })), "{what}: {result:?}");
        }
    }

    /// One track of 300 events, 1 ns apart, 10 ps long: three 100 ns buckets of 100
    /// events, so level 0 has three groups (and coarser levels fewer).
    fn bytes_with_groups() -> Vec<u8> {
        let mut b = TimelineBuilder::new();
        let s = b.section("/host:CPU", SectionKind::Host);
        let t = b.track(s, "a").expect("track");
        let n = b.name("e");
        for i in 0..300 {
            b.event(t, i * 1000, 10, n, 0).expect("event");
        }
        b.finish().expect("finish").to_bytes(&CacheKey::default())
    }

    /// Value `field` of the u32 column `part`.
    fn read_u32(bytes: &[u8], part: Part, field: usize) -> u32 {
        let (layout, _) = parse_layout(bytes, Path::new("t")).expect("layout");
        Col::<u32>::new(layout.part(bytes, part)).at(field)
    }

    #[test]
    fn groups_postings_and_name_ids_out_of_place_are_refused() {
        let good = bytes_with_groups();
        let (layout, _) = parse_layout(&good, Path::new("t")).expect("layout");
        assert!(layout.summary.groups >= 3, "the fixture has groups: {:?}", layout.summary);
        assert!(TimelineIndex::from_bytes(good.clone()).is_ok());
        let first_end = read_u32(&good, Part::GroupFirst, 0) + read_u32(&good, Part::GroupCount, 0);
        type Patch = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(&str, Patch)> = vec![
            ("empty group", Box::new(|b| patch_u32(b, Part::GroupCount, 0, 0))),
            ("group past its run", Box::new(|b| patch_u32(b, Part::GroupCount, 2, 1000))),
            ("group starting past its run", Box::new(|b| patch_u32(b, Part::GroupFirst, 2, 400))),
            ("groups overlapping", Box::new(move |b| patch_u32(b, Part::GroupFirst, 1, first_end - 1))),
            ("groups out of order", Box::new(|b| patch_u32(b, Part::GroupFirst, 1, 0))),
            ("longest before its group", Box::new(|b| patch_u32(b, Part::GroupLongest, 1, 0))),
            ("longest after its group", Box::new(|b| patch_u32(b, Part::GroupLongest, 0, 299))),
            ("name id", Box::new(|b| patch_u32(b, Part::Name, 17, 1))),
            ("posting", Box::new(|b| patch_u32(b, Part::Postings, 5, 300))),
        ];
        for (what, patch) in cases {
            let mut damaged = good.clone();
            patch(&mut damaged);
            let result = TimelineIndex::from_bytes(damaged);
            assert!(matches!(result, Err(CacheError::Corrupt { .. })), "{what}: {result:?}");
        }
        // A group moved within its gap stays valid: the checks are not just "unchanged".
        let mut moved = good.clone();
        let second = read_u32(&good, Part::GroupFirst, 1);
        patch_u32(&mut moved, Part::GroupFirst, 1, second + 1);
        patch_u32(&mut moved, Part::GroupCount, 1, read_u32(&good, Part::GroupCount, 1) - 1);
        if read_u32(&good, Part::GroupLongest, 1) == second {
            patch_u32(&mut moved, Part::GroupLongest, 1, second + 1);
        }
        assert!(TimelineIndex::from_bytes(moved).is_ok());
    }
}

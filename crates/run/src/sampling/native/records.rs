//! The records a `perf_event` ring buffer holds, decoded from bytes the kernel wrote
//! (`PERF_RECORD_*` in `linux/perf_event.h`), for events opened with sample type
//! `TID | TIME | CALLCHAIN` and no `sample_id_all`.
//!
//! Decoding is a pure function of the bytes, so a kernel bug or a misread ring costs
//! what it garbles and never a panic or an endless loop: every record is checked
//! against its own size and the bytes left, a header whose size is below a header's
//! (or past the end) ends the batch, and what was skipped is counted.

/// `PERF_RECORD_LOST`: `{ u64 id; u64 lost; }`.
pub const RECORD_LOST: u32 = 2;
/// `PERF_RECORD_THROTTLE`: the kernel lowered the rate (`kernel.perf_event_max_sample_rate`).
pub const RECORD_THROTTLE: u32 = 5;
/// `PERF_RECORD_UNTHROTTLE`.
pub const RECORD_UNTHROTTLE: u32 = 6;
/// `PERF_RECORD_SAMPLE`.
pub const RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_LOST_SAMPLES`: `{ u64 lost; }`.
pub const RECORD_LOST_SAMPLES: u32 = 13;

/// The size of `struct perf_event_header` (`u32 type; u16 misc; u16 size;`), bytes.
pub const HEADER_BYTES: usize = 8;

/// Call-chain entries at or above this are context markers, not addresses
/// (`PERF_CONTEXT_MAX`, -4095).
const CONTEXT_MAX: u64 = -4095i64 as u64;
/// `PERF_CONTEXT_USER`: the entries after it are user-space addresses.
const CONTEXT_USER: u64 = -512i64 as u64;

/// One `PERF_RECORD_SAMPLE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawSample {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// When, on the event's clock, ns.
    pub time_ns: u64,
    /// User-space addresses, innermost first: the instruction pointer, then the return
    /// addresses the kernel found by following frame pointers.
    pub user_ips: Vec<u64>,
}

/// What one batch of records held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The samples, in the ring's order.
    pub samples: Vec<RawSample>,
    /// Samples the kernel dropped (its buffer was full).
    pub lost: u64,
    /// Times the kernel throttled the event.
    pub throttled: u64,
    /// Records that did not decode (bad sizes), and the bytes after a broken header.
    pub corrupt: u64,
}

/// Decodes the records in `bytes` (whole records, as copied out of a ring) into `out`.
pub fn parse(bytes: &[u8], out: &mut Parsed) {
    let mut at = 0;
    while let Some(header) = bytes.get(at..at + HEADER_BYTES) {
        let kind = u32_at(header, 0).unwrap_or(0);
        let size = u16_at(header, 6).map_or(0, usize::from);
        let Some(record) = bytes.get(at..at + size).filter(|_| size >= HEADER_BYTES) else {
            // Nothing after a broken header can be found again.
            out.corrupt += 1;
            return;
        };
        let body = &record[HEADER_BYTES..];
        match kind {
            RECORD_SAMPLE => match sample(body) {
                Some(sample) => out.samples.push(sample),
                None => out.corrupt += 1,
            },
            RECORD_LOST => out.lost = out.lost.saturating_add(u64_at(body, 8).unwrap_or(0)),
            RECORD_LOST_SAMPLES => out.lost = out.lost.saturating_add(u64_at(body, 0).unwrap_or(0)),
            RECORD_THROTTLE => out.throttled += 1,
            _ => {}
        }
        at += size;
    }
    if at < bytes.len() {
        out.corrupt += 1;
    }
}

/// A sample's body: `u32 pid, tid; u64 time; u64 nr; u64 ips[nr];`.
fn sample(body: &[u8]) -> Option<RawSample> {
    let pid = u32_at(body, 0)?;
    let tid = u32_at(body, 4)?;
    let time_ns = u64_at(body, 8)?;
    let nr = usize::try_from(u64_at(body, 16)?).ok()?;
    let ips = body.get(24..)?;
    if nr > ips.len() / 8 {
        return None;
    }
    // Kernel entries come first when they are there; keep what follows the user marker
    // (all of it when there is no marker).
    let mut user = true;
    let mut user_ips = Vec::with_capacity(nr);
    for chunk in ips.chunks_exact(8).take(nr) {
        let ip = u64::from_ne_bytes(chunk.try_into().ok()?);
        if ip >= CONTEXT_MAX {
            user = ip == CONTEXT_USER;
        } else if user && ip != 0 {
            user_ips.push(ip);
        }
    }
    Some(RawSample { pid, tid, time_ns, user_ips })
}

/// Where the bytes from `tail` to `head` lie in a ring of `size` bytes: one span, or two
/// when they wrap past its end (`(offset, length)` each); `None` when the positions make
/// no sense (the head behind the tail, or more bytes than the ring holds).
pub fn ring_spans(size: u64, tail: u64, head: u64) -> Option<[(usize, usize); 2]> {
    let length = head.checked_sub(tail)?;
    if size == 0 || length > size {
        return None;
    }
    let start = tail % size;
    let first = length.min(size - start);
    let to_usize = |n: u64| usize::try_from(n).ok();
    Some([(to_usize(start)?, to_usize(first)?), (0, to_usize(length - first)?)])
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A record of `kind` with `body`, its header's size right.
    pub(crate) fn record(kind: u32, body: &[u8]) -> Vec<u8> {
        let mut bytes = kind.to_ne_bytes().to_vec();
        bytes.extend(0u16.to_ne_bytes());
        bytes.extend(u16::try_from(HEADER_BYTES + body.len()).unwrap().to_ne_bytes());
        bytes.extend(body);
        bytes
    }

    /// A sample record's bytes.
    pub(crate) fn sample_record(pid: u32, tid: u32, time: u64, ips: &[u64]) -> Vec<u8> {
        let mut body = pid.to_ne_bytes().to_vec();
        body.extend(tid.to_ne_bytes());
        body.extend(time.to_ne_bytes());
        body.extend((ips.len() as u64).to_ne_bytes());
        for ip in ips {
            body.extend(ip.to_ne_bytes());
        }
        record(RECORD_SAMPLE, &body)
    }

    fn parsed(bytes: &[u8]) -> Parsed {
        let mut out = Parsed::default();
        parse(bytes, &mut out);
        out
    }

    #[test]
    fn samples_lost_and_throttle_records() {
        let mut bytes = sample_record(7, 8, 1000, &[CONTEXT_USER, 0x40_1000, 0x40_2000]);
        bytes.extend(record(RECORD_THROTTLE, &[0; 24]));
        bytes.extend(record(RECORD_LOST, &[1u64.to_ne_bytes(), 5u64.to_ne_bytes()].concat()));
        bytes.extend(record(RECORD_LOST_SAMPLES, &3u64.to_ne_bytes()));
        bytes.extend(record(42, &[1, 2, 3, 4, 5, 6, 7, 8])); // unknown: skipped
        // Kernel frames before the user marker are dropped.
        bytes.extend(sample_record(7, 9, 2000, &[-128i64 as u64, 0xffff_ffff_8100_0000, CONTEXT_USER, 0x40_3000]));
        let out = parsed(&bytes);
        assert_eq!(
            out.samples,
            [
                RawSample { pid: 7, tid: 8, time_ns: 1000, user_ips: vec![0x40_1000, 0x40_2000] },
                RawSample { pid: 7, tid: 9, time_ns: 2000, user_ips: vec![0x40_3000] },
            ]
        );
        assert_eq!((out.lost, out.throttled, out.corrupt), (8, 1, 0));
    }

    #[test]
    fn truncated_and_garbage_records_are_counted_not_trusted() {
        let good = sample_record(1, 1, 10, &[0x1000]);
        // A chain longer than its record.
        let mut lying = sample_record(1, 1, 20, &[0x1000]);
        lying[8 + 16..8 + 24].copy_from_slice(&1_000_000u64.to_ne_bytes());
        let mut bytes = [good.clone(), lying, good.clone()].concat();
        assert_eq!(parsed(&bytes).samples.len(), 2);
        assert_eq!(parsed(&bytes).corrupt, 1);
        // Cut in the middle of the last record: the first two decode.
        bytes.truncate(bytes.len() - 5);
        let out = parsed(&bytes);
        assert_eq!((out.samples.len(), out.corrupt), (1, 2));
        // A header of size 0 (or 3) stops the batch instead of looping on it.
        let mut zero = good.clone();
        zero.extend([9, 0, 0, 0, 0, 0, 0, 0]);
        zero.extend(good.clone());
        let out = parsed(&zero);
        assert_eq!((out.samples.len(), out.corrupt), (1, 1));
        // Random bytes never panic.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for length in 0..400 {
            let noise: Vec<u8> = (0..length)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            let _ = parsed(&noise);
        }
        // A short buffer is one corrupt tail.
        assert_eq!(parsed(&[1, 2, 3]).corrupt, 1);
        assert_eq!(parsed(&[]), Parsed::default());
    }

    #[test]
    fn a_record_wrapping_past_the_rings_end_is_read_whole() {
        let first = sample_record(3, 4, 100, &[0xa000, 0xb000]);
        let second = sample_record(3, 4, 200, &[0xc000]);
        let size = 128usize;
        // The first record starts 20 bytes before the end of the ring and wraps.
        let tail = 3 * size as u64 + (size as u64 - 20);
        let mut ring = vec![0xeeu8; size];
        for (i, byte) in [first.clone(), second.clone()].concat().into_iter().enumerate() {
            ring[(tail as usize + i) % size] = byte;
        }
        let head = tail + (first.len() + second.len()) as u64;
        let spans = ring_spans(size as u64, tail, head).unwrap();
        assert_eq!(spans, [(108, 20), (0, first.len() + second.len() - 20)]);
        let copied: Vec<u8> = spans.iter().flat_map(|&(at, n)| ring[at..at + n].iter().copied()).collect();
        let out = parsed(&copied);
        assert_eq!(out.samples.iter().map(|s| s.time_ns).collect::<Vec<_>>(), [100, 200]);
        assert_eq!(out.samples[0].user_ips, [0xa000, 0xb000]);
        // Positions that make no sense.
        assert_eq!(ring_spans(64, 10, 5), None);
        assert_eq!(ring_spans(64, 0, 65), None);
        assert_eq!(ring_spans(0, 0, 0), None);
        assert_eq!(ring_spans(64, 64, 64), Some([(0, 0), (0, 0)]));
    }
}

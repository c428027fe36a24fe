//! The pickle decoder on pickles written by CPython's own `pickle` module.

use super::*;

/// `{'segments': [{'address': 2**47 + 5, 'neg': -1, 'big': -2**40, 'f': 0.5, 't': (0, 0),
/// 'ok': True, 'no': None, 'frames': shared}], 'device_traces': [[{'action': 'alloc',
/// 'frames': shared}, {'action': 'free_requested', 'frames': shared}]]}` where `shared`
/// is one list `[{'name': 'f', 'filename': 'a.py', 'line': 3}]`, protocol 2.
const PROTOCOL_2: &[u8] = b"\x80\x02\x7d\x71\x00\x28\x58\x08\x00\x00\x00\x73\x65\x67\x6d\x65\x6e\x74\x73\x71\x01\x5d\x71\x02\x7d\x71\x03\x28\x58\x07\x00\x00\x00\x61\x64\x64\x72\x65\x73\x73\x71\x04\x8a\x07\x05\x00\x00\x00\x00\x80\x00\x58\x03\x00\x00\x00\x6e\x65\x67\x71\x05\x4a\xff\xff\xff\xff\x58\x03\x00\x00\x00\x62\x69\x67\x71\x06\x8a\x06\x00\x00\x00\x00\x00\xff\x58\x01\x00\x00\x00\x66\x71\x07\x47\x3f\xe0\x00\x00\x00\x00\x00\x00\x58\x01\x00\x00\x00\x74\x71\x08\x4b\x00\x4b\x00\x86\x71\x09\x58\x02\x00\x00\x00\x6f\x6b\x71\x0a\x88\x58\x02\x00\x00\x00\x6e\x6f\x71\x0b\x4e\x58\x06\x00\x00\x00\x66\x72\x61\x6d\x65\x73\x71\x0c\x5d\x71\x0d\x7d\x71\x0e\x28\x58\x04\x00\x00\x00\x6e\x61\x6d\x65\x71\x0f\x68\x07\x58\x08\x00\x00\x00\x66\x69\x6c\x65\x6e\x61\x6d\x65\x71\x10\x58\x04\x00\x00\x00\x61\x2e\x70\x79\x71\x11\x58\x04\x00\x00\x00\x6c\x69\x6e\x65\x71\x12\x4b\x03\x75\x61\x75\x61\x58\x0d\x00\x00\x00\x64\x65\x76\x69\x63\x65\x5f\x74\x72\x61\x63\x65\x73\x71\x13\x5d\x71\x14\x5d\x71\x15\x28\x7d\x71\x16\x28\x58\x06\x00\x00\x00\x61\x63\x74\x69\x6f\x6e\x71\x17\x58\x05\x00\x00\x00\x61\x6c\x6c\x6f\x63\x71\x18\x68\x0c\x68\x0d\x75\x7d\x71\x19\x28\x68\x17\x58\x0e\x00\x00\x00\x66\x72\x65\x65\x5f\x72\x65\x71\x75\x65\x73\x74\x65\x64\x71\x1a\x68\x0c\x68\x0d\x75\x65\x61\x75\x2e";
/// The same object, protocol 4 (`MEMOIZE`, `FRAME`, `SHORT_BINUNICODE`).
const PROTOCOL_4: &[u8] = b"\x80\x04\x95\xe5\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x08\x73\x65\x67\x6d\x65\x6e\x74\x73\x94\x5d\x94\x7d\x94\x28\x8c\x07\x61\x64\x64\x72\x65\x73\x73\x94\x8a\x07\x05\x00\x00\x00\x00\x80\x00\x8c\x03\x6e\x65\x67\x94\x4a\xff\xff\xff\xff\x8c\x03\x62\x69\x67\x94\x8a\x06\x00\x00\x00\x00\x00\xff\x8c\x01\x66\x94\x47\x3f\xe0\x00\x00\x00\x00\x00\x00\x8c\x01\x74\x94\x4b\x00\x4b\x00\x86\x94\x8c\x02\x6f\x6b\x94\x88\x8c\x02\x6e\x6f\x94\x4e\x8c\x06\x66\x72\x61\x6d\x65\x73\x94\x5d\x94\x7d\x94\x28\x8c\x04\x6e\x61\x6d\x65\x94\x68\x07\x8c\x08\x66\x69\x6c\x65\x6e\x61\x6d\x65\x94\x8c\x04\x61\x2e\x70\x79\x94\x8c\x04\x6c\x69\x6e\x65\x94\x4b\x03\x75\x61\x75\x61\x8c\x0d\x64\x65\x76\x69\x63\x65\x5f\x74\x72\x61\x63\x65\x73\x94\x5d\x94\x5d\x94\x28\x7d\x94\x28\x8c\x06\x61\x63\x74\x69\x6f\x6e\x94\x8c\x05\x61\x6c\x6c\x6f\x63\x94\x68\x0c\x68\x0d\x75\x7d\x94\x28\x68\x17\x8c\x0e\x66\x72\x65\x65\x5f\x72\x65\x71\x75\x65\x73\x74\x65\x64\x94\x68\x0c\x68\x0d\x75\x65\x61\x75\x2e";
/// `set([1])`, protocol 2: a `GLOBAL` and a `REDUCE`.
const A_SET: &[u8] = b"\x80\x02\x63\x5f\x5f\x62\x75\x69\x6c\x74\x69\x6e\x5f\x5f\x0a\x73\x65\x74\x0a\x71\x00\x5d\x71\x01\x4b\x01\x61\x85\x71\x02\x52\x71\x03\x2e";
/// `2**70`.
const TOO_BIG: &[u8] = b"\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x40\x2e";
/// `2**63`, which fits 64 bits unsigned.
const UNSIGNED: &[u8] = b"\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00\x2e";
/// `-2**63`.
const SMALLEST: &[u8] = b"\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x2e";

fn check_object(objects: &Objects, top: Value) {
    let Value::Dict(top) = top else { panic!("top is a dict, got {top:?}") };
    let segments = objects.items(objects.get(top, "segments").expect("segments"));
    let Value::Dict(segment) = segments[0] else { panic!("a segment dict") };
    assert_eq!(objects.get(segment, "address"), Some(Value::Int((1 << 47) + 5)));
    assert_eq!(objects.get(segment, "neg"), Some(Value::Int(-1)));
    assert_eq!(objects.get(segment, "big"), Some(Value::Int(-(1 << 40))));
    assert_eq!(objects.get(segment, "f"), Some(Value::Float(0.5)));
    assert_eq!(objects.items(objects.get(segment, "t").expect("t")), &[Value::Int(0), Value::Int(0)]);
    assert_eq!(objects.get(segment, "ok"), Some(Value::Bool(true)));
    assert_eq!(objects.get(segment, "no"), Some(Value::None));
    let frames = objects.get(segment, "frames").expect("frames");
    let traces = objects.items(objects.get(top, "device_traces").expect("device_traces"));
    let entries = objects.items(traces[0]);
    assert_eq!(entries.len(), 2);
    for (entry, action) in entries.iter().zip(["alloc", "free_requested"]) {
        let Value::Dict(entry) = *entry else { panic!("an entry dict") };
        assert_eq!(objects.text(objects.get(entry, "action").expect("action")), Some(action));
        // The memo makes the three references one list.
        assert_eq!(objects.get(entry, "frames"), Some(frames));
    }
    let Value::Dict(frame) = objects.items(frames)[0] else { panic!("a frame dict") };
    assert_eq!(objects.text(objects.get(frame, "filename").expect("filename")), Some("a.py"));
    assert_eq!(objects.get(frame, "line"), Some(Value::Int(3)));
}

#[test]
fn protocols_2_and_4_decode_to_the_same_shared_objects() {
    for bytes in [PROTOCOL_2, PROTOCOL_4] {
        let (objects, top) = decode(bytes, &mut KeepAll).expect("decodes");
        check_object(&objects, top);
    }
}

/// Takes every dict that has an `action`, numbering them.
struct TakeEntries(Vec<String>);

impl Absorb for TakeEntries {
    fn absorb(&mut self, objects: &Objects, pairs: &[(Value, Value)]) -> Result<Option<u32>, String> {
        let Some(action) = get_in(objects, pairs, "action").and_then(|v| objects.text(v)) else { return Ok(None) };
        self.0.push(action.to_string());
        Ok(Some(self.0.len() as u32 - 1))
    }
}

#[test]
fn an_absorber_takes_the_dicts_it_wants_and_leaves_tokens() {
    let mut taker = TakeEntries(Vec::new());
    let (objects, top) = decode(PROTOCOL_4, &mut taker).expect("decodes");
    assert_eq!(taker.0, ["alloc", "free_requested"]);
    let Value::Dict(top) = top else { panic!("a dict") };
    let traces = objects.items(objects.get(top, "device_traces").expect("device_traces"));
    assert_eq!(objects.items(traces[0]), &[Value::Taken(0), Value::Taken(1)]);
    // Frames (dicts in a list, but without an action) stay.
    let Value::Dict(segment) = objects.items(objects.get(top, "segments").expect("segments"))[0] else { panic!() };
    assert_eq!(objects.items(objects.get(segment, "frames").expect("frames")).len(), 1);
}

#[test]
fn pickles_that_call_code_are_refused_without_running_anything() {
    let error = decode(A_SET, &mut KeepAll).expect_err("refused");
    assert!(error.message.contains("GLOBAL"), "{error:?}");
    assert_eq!(error.offset, 2);
}

#[test]
fn integers_are_exact_to_64_bits_signed_or_unsigned_and_wider_ones_are_an_error() {
    assert!(decode(TOO_BIG, &mut KeepAll).expect_err("too big").message.contains("64 bits"));
    assert_eq!(decode(UNSIGNED, &mut KeepAll).expect("fits").1, Value::Uint(1 << 63));
    assert_eq!(decode(SMALLEST, &mut KeepAll).expect("fits").1, Value::Int(i64::MIN));
}

#[test]
fn every_truncation_is_an_error_with_an_offset_and_never_a_panic() {
    for end in 0..PROTOCOL_4.len() {
        let error = decode(&PROTOCOL_4[..end], &mut KeepAll).expect_err("truncated");
        assert!(error.offset <= end as u64, "{error:?} at {end}");
    }
}

#[test]
fn memo_references_to_undefined_entries_and_empty_stacks_are_errors() {
    assert!(decode(b"\x80\x04h\x05.", &mut KeepAll).expect_err("undefined").message.contains("memo entry 5"));
    assert!(decode(b"\x80\x04.", &mut KeepAll).expect_err("empty").message.contains("empty stack"));
    assert!(decode(b"\x80\x04(K\x01u.", &mut KeepAll).expect_err("no dict").message.contains("reads an empty"));
    assert!(decode(b"\x80\x01N.", &mut KeepAll).expect_err("protocol").message.contains("protocol 1"));
    // A far memo index is kept sparse, not allocated.
    assert_eq!(decode(b"\x80\x02Nr\xff\xff\xff\x7f0j\xff\xff\xff\x7f.", &mut KeepAll).expect("ok").1, Value::None);
}

#[test]
fn a_dict_set_in_two_goes_around_another_keeps_all_its_items() {
    // A = {1: 2}; B = {5: 6}; A[3] = B (protocol 0's SETITEM after B's items).
    let (objects, top) = decode(b"\x80\x02}(K\x01K\x02uK\x03}(K\x05K\x06us.", &mut KeepAll).expect("decodes");
    let Value::Dict(a) = top else { panic!("a dict") };
    let pairs = objects.dict(a);
    assert_eq!(pairs.len(), 2);
    assert_eq!(pairs[0], (Value::Int(1), Value::Int(2)));
    let (Value::Int(3), Value::Dict(b)) = pairs[1] else { panic!("{pairs:?}") };
    assert_eq!(objects.dict(b), &[(Value::Int(5), Value::Int(6))]);
}

/// Takes every dict that has an `action` and is done with its `frames` list.
struct TakeEntriesAndFrames(Vec<u32>);

impl Absorb for TakeEntriesAndFrames {
    fn absorb(&mut self, objects: &Objects, pairs: &[(Value, Value)]) -> Result<Option<u32>, String> {
        if get_in(objects, pairs, "action").is_none() {
            return Ok(None);
        }
        if let Some(Value::List(frames)) = get_in(objects, pairs, "frames") {
            self.0.push(frames);
        }
        Ok(Some(0))
    }

    fn finished_list(&mut self) -> Option<u32> {
        self.0.pop()
    }
}

#[test]
fn a_list_the_absorber_is_done_with_is_freed_and_reads_as_empty() {
    let mut taker = TakeEntriesAndFrames(Vec::new());
    let (objects, top) = decode(PROTOCOL_4, &mut taker).expect("decodes");
    assert!(taker.0.is_empty(), "every finished list was asked for");
    let Value::Dict(top) = top else { panic!("a dict") };
    // The segment shares the entries' list through the memo: it is the same list, now empty.
    let Value::Dict(segment) = objects.items(objects.get(top, "segments").expect("segments"))[0] else { panic!() };
    assert_eq!(objects.items(objects.get(segment, "frames").expect("frames")), &[]);
    assert_eq!(objects.items(objects.get(top, "device_traces").expect("traces")).len(), 1);
}

#[test]
fn memo_slots_give_back_every_kind_of_value() {
    let mut memo = Memo::default();
    let values = [
        Value::None,
        Value::Bool(false),
        Value::Bool(true),
        Value::Int(-(1 << 40)),
        Value::Uint(u64::MAX),
        Value::Float(0.5),
        Value::Str(7),
        Value::List(u32::MAX),
        Value::Tuple(3),
        Value::Dict(0),
        Value::Taken(9),
    ];
    for (index, value) in values.iter().enumerate() {
        memo.put(index as u64, *value);
    }
    // Rebinding an index, and an index far past the end (kept aside).
    memo.put(1, Value::Int(42));
    memo.put(1 << 40, Value::Str(5));
    let read: Vec<Option<Value>> = (0..values.len() as u64).map(|i| memo.get(i)).collect();
    let mut expected: Vec<Option<Value>> = values.iter().copied().map(Some).collect();
    expected[1] = Some(Value::Int(42));
    assert_eq!(read, expected);
    assert_eq!(memo.get(1 << 40), Some(Value::Str(5)));
    assert_eq!(memo.get(values.len() as u64), None);
}

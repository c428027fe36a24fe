//! Fuzzes the decoder of Kineto's on-demand datagrams (`mlprof run`'s socket): any bytes
//! give a message or an error, never a panic, and a decoded message's type round-trips
//! through the reply encoder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlprof_run::kineto_ipc::{HEADER_LEN, decode, encode};

fuzz_target!(|data: &[u8]| {
    let Ok(message) = decode(data) else { return };
    let reply = encode(message.type_name(), &[]);
    assert_eq!(reply.len(), HEADER_LEN);
    assert_eq!(&reply[8..8 + message.type_name().len()], message.type_name().as_bytes());
});

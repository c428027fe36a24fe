//! Fuzzes what the node's agent and `mlprof run --agent` read from each other: any bytes
//! as an HTTP answer (a hostile listener on the agent's port), as a registration (the
//! agent's `POST /api/register`) or its reply (an ask the run would act on), and as a
//! `--retain` budget, and as the listening sockets both look up (a socket-diagnostics
//! datagram, a `/proc/net/tcp` table), and as an object store's URL and keys: a value or
//! an error, never a panic; an ask out of range is never taken, a URL reads back as
//! itself, and a key taken as a profile names a place inside the cache.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlprof_run::agent_link::{MAX_ASK, Registration, RegistrationReply};
use mlprof_run::http1::parse_response;

fuzz_target!(|data: &[u8]| {
    if let Some((status, body)) = parse_response(data) {
        assert!(body.len() <= data.len() || status > 0);
    }
    let _ = serde_json::from_slice::<Registration>(data);
    if let Ok(reply) = serde_json::from_slice::<RegistrationReply>(data) {
        for ask in reply.asks {
            if let Some(duration) = ask.duration() {
                assert!(!duration.is_zero() && duration <= MAX_ASK);
            }
        }
    }
    let mut listeners = Vec::new();
    let _ = mlprof_run::sock_diag::parse(data, &mut listeners);
    assert!(listeners.len() <= data.len() / 88);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = mlprof_run::listening::parse_table(text);
        let _ = text.parse::<mlprof_agent::history::Retain>();
        if let Ok(url) = mlprof_objects::StoreUrl::parse(text) {
            assert_eq!(mlprof_objects::StoreUrl::parse(&url.to_string()).ok(), Some(url));
        }
        let parts: Vec<&str> = text.split('/').collect();
        if let Ok(key) = mlprof_objects::layout::profile_key(&parts) {
            let root = std::path::Path::new("/cache");
            let dir = key.session_dir(root);
            let normal = |c: std::path::Component| matches!(c, std::path::Component::Normal(_));
            assert!(dir.strip_prefix(root).is_ok_and(|inside| inside.components().all(normal)), "{dir:?}");
            assert!(dir.join(&key.file).parent() == Some(dir.as_path()));
        }
    }
});

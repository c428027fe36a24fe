//! Uploads and mirrors against a real S3 peer: moto's server (PyPI `moto[s3]`, started
//! from the interpreter `MLPROF_MOTO_PYTHON` names; `.ci/run` makes that venv). A session
//! uploaded lands in TensorBoard's layout byte for byte, a large one in parts; the mirror
//! fetches new and changed sessions whole, drops deleted ones, never writes a hostile key
//! and says what it left out (and `mlprof serve`, when that was every profile); an
//! unreachable store or a missing bucket is one line.

use std::path::{Path, PathBuf};

mod peers;

use mlprof_objects::{Mirror, Store, StoreUrl};
use peers::moto;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

fn fixture_session() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/xspace/tf_keras_pipelined/logdir/train/plugins/profile/2026_11_21_19_24_04")
}

/// A log directory holding `run/plugins/profile/<session>/` with the fixture's files.
fn logdir_with(session: &str) -> (tempfile::TempDir, PathBuf) {
    let logdir = tempfile::tempdir().expect("temp dir");
    let dir = logdir.path().join("run/plugins/profile").join(session);
    std::fs::create_dir_all(&dir).expect("session dir");
    for entry in std::fs::read_dir(fixture_session()).expect("fixture") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy");
    }
    (logdir, dir)
}

fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| {
            let e = e.expect("entry");
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).expect("read"))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_session_uploaded_is_mirrored_whole_and_follows_the_store() {
    let Some(moto) = moto("a_session_uploaded_is_mirrored_whole_and_follows_the_store") else { return };
    moto.bucket("follow");
    let store = moto.store("s3://follow/node1");
    let (logdir, session) = logdir_with("2026_11_26_10_00_00");
    let rt = runtime();
    let uploaded = rt.block_on(store.upload_session(logdir.path(), &session)).expect("uploaded");
    assert_eq!(uploaded.url.to_string(), "s3://follow/node1/run/plugins/profile/2026_11_26_10_00_00");
    assert_eq!(uploaded.files, files_of(&session).len());
    let keys = moto.boto("for o in s3.list_objects_v2(Bucket='follow')['Contents']: print(o['Key'])");
    assert!(keys.contains("node1/run/plugins/profile/2026_11_26_10_00_00/vm.xplane.pb"), "{keys}");

    // Keys that are not profiles are left alone, and keys that could lead out of the
    // cache are named and never written.
    moto.boto(
        "s3.put_object(Bucket='follow', Key='node1/run/notes.txt', Body=b'x')\n\
         s3.put_object(Bucket='follow', Key='node1/evil/../../../escaped/plugins/profile/s/h.xplane.pb', Body=b'x')",
    );
    let cache = tempfile::tempdir().expect("cache");
    let mut mirror = Mirror::open(moto.store("s3://follow/node1"), cache.path()).expect("mirror");
    let synced = rt.block_on(mirror.sync()).expect("synced");
    assert_eq!((synced.sessions, synced.fetched, synced.removed), (1, 1, 0), "{synced:?}");
    assert_eq!(synced.fetched_bytes, uploaded.bytes);
    assert!(synced.skipped.iter().any(|s| s.contains("evil")), "{:?}", synced.skipped);
    let mirrored = mirror.profiles().join("run/plugins/profile/2026_11_26_10_00_00");
    assert_eq!(files_of(&mirrored), files_of(&session), "byte for byte");
    let everything: Vec<_> = walk(cache.path());
    assert!(everything.iter().all(|p| !p.to_string_lossy().contains("escaped")), "{everything:?}");
    assert!(!everything.iter().any(|p| p.ends_with("notes.txt")));

    // Nothing changed: nothing is fetched again.
    let again = rt.block_on(mirror.sync()).expect("synced");
    assert_eq!((again.sessions, again.fetched), (1, 0));

    // A second session arrives, the first changes, then goes.
    let (logdir2, session2) = logdir_with("2026_11_26_11_00_00");
    rt.block_on(store.upload_session(logdir2.path(), &session2)).expect("uploaded");
    moto.boto("s3.put_object(Bucket='follow', Key='node1/run/plugins/profile/2026_11_26_10_00_00/w.pt.trace.json', Body=b'{\"traceEvents\": []}')");
    let changed = rt.block_on(mirror.sync()).expect("synced");
    assert_eq!((changed.sessions, changed.fetched), (2, 2), "{changed:?}");
    assert!(mirrored.join("w.pt.trace.json").is_file(), "the changed session is fetched whole");
    moto.boto(
        "for o in s3.list_objects_v2(Bucket='follow', Prefix='node1/run/plugins/profile/2026_11_26_10_00_00/')['Contents']:\n    \
         s3.delete_object(Bucket='follow', Key=o['Key'])",
    );
    let removed = rt.block_on(mirror.sync()).expect("synced");
    assert_eq!((removed.sessions, removed.removed), (1, 1), "{removed:?}");
    assert!(!mirrored.exists());

    // A session under a level the store can no longer list is kept, not taken for gone.
    moto.boto("s3.put_object(Bucket='follow', Key='node1/kept/plugins/profile/s/h.xplane.pb', Body=b'x')");
    assert_eq!(rt.block_on(mirror.sync()).expect("synced").fetched, 1);
    moto.boto("s3.put_object(Bucket='follow', Key='node1/kept/../../x/plugins/profile/s/h.xplane.pb', Body=b'x')");
    let partial = rt.block_on(mirror.sync()).expect("synced");
    assert_eq!(partial.removed, 0, "{partial:?}");
    assert!(partial.skipped.iter().any(|s| s.contains("s3://follow/node1/kept: list")), "{:?}", partial.skipped);
    assert!(mirror.profiles().join("kept/plugins/profile/s/h.xplane.pb").is_file());
    drop(mirror);

    // What a killed process had mirrored is kept: a new mirror fetches nothing.
    let mut reopened = Mirror::open(moto.store("s3://follow/node1"), cache.path()).expect("mirror");
    let reopened = rt.block_on(reopened.sync()).expect("synced");
    assert_eq!((reopened.fetched, reopened.removed), (0, 0), "{reopened:?}");
}

#[test]
fn a_large_file_goes_up_in_parts() {
    let Some(moto) = moto("a_large_file_goes_up_in_parts") else { return };
    moto.bucket("large");
    let logdir = tempfile::tempdir().expect("temp dir");
    let session = logdir.path().join("plugins/profile/s1");
    std::fs::create_dir_all(&session).expect("dir");
    let size = mlprof_objects::upload::SINGLE_PUT_BYTES as usize + 3 * mlprof_objects::upload::PART_BYTES / 2;
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    std::fs::write(session.join("h.xplane.pb"), &data).expect("write");
    let rt = runtime();
    let uploaded = rt.block_on(moto.store("s3://large").upload_session(logdir.path(), &session)).expect("uploaded");
    assert_eq!(uploaded.bytes, size as u64);
    let etag = moto.boto("print(s3.head_object(Bucket='large', Key='plugins/profile/s1/h.xplane.pb')['ETag'])");
    let parts = size.div_ceil(mlprof_objects::upload::PART_BYTES);
    assert!(
        etag.trim().trim_matches('"').ends_with(&format!("-{parts}")),
        "a multipart upload of {parts} parts: {etag}"
    );
    let cache = tempfile::tempdir().expect("cache");
    let mut mirror = Mirror::open(moto.store("s3://large"), cache.path()).expect("mirror");
    rt.block_on(mirror.sync()).expect("synced");
    assert_eq!(std::fs::read(mirror.profiles().join("plugins/profile/s1/h.xplane.pb")).expect("read"), data);
}

#[test]
fn an_unreachable_store_or_a_missing_bucket_is_one_line() {
    let Some(moto) = moto("an_unreachable_store_or_a_missing_bucket_is_one_line") else { return };
    let rt = runtime();
    let cache = tempfile::tempdir().expect("cache");
    let mut missing = Mirror::open(moto.store("s3://no-such-bucket/p"), cache.path()).expect("mirror");
    let error = rt.block_on(missing.sync()).expect_err("no bucket").to_string();
    assert!(error.starts_with("s3://no-such-bucket/p: list:") && !error.contains('\n'), "{error}");

    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let mut vars = moto.vars();
    vars[0].1 = format!("http://127.0.0.1:{port}");
    let url = StoreUrl::parse("s3://nowhere").expect("url");
    let mut unreachable = Mirror::open(Store::open_with(&url, vars).expect("opens"), cache.path()).expect("mirror");
    let started = std::time::Instant::now();
    let error = rt.block_on(unreachable.sync()).expect_err("unreachable").to_string();
    assert!(error.starts_with("s3://nowhere: list:") && !error.contains('\n'), "{error}");
    assert!(started.elapsed() < mlprof_objects::store::RETRY_TIMEOUT * 2, "gave up in {:?}", started.elapsed());
}

#[test]
fn serving_a_store_whose_profiles_are_all_left_out_says_so() {
    let Some(moto) = moto("serving_a_store_whose_profiles_are_all_left_out_says_so") else { return };
    moto.bucket("hostile");
    moto.boto("s3.put_object(Bucket='hostile', Key='p/evil/../../../x/plugins/profile/s/h.xplane.pb', Body=b'x')");
    let cache = tempfile::tempdir().expect("cache");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["serve", "s3://hostile/p", "--port", "0", "--cache-dir"])
        .arg(cache.path())
        .envs(moto.vars())
        .output()
        .expect("mlprof serve runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "read fine, nothing usable: {err}");
    assert!(err.contains("mlprof serve: skipped ") && err.contains("evil"), "{err}");
    let said = "mlprof: error: no profile of s3://hostile/p could be mirrored: 1 left out, each said above";
    assert!(err.contains(said), "{err}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("dir").map(|e| e.expect("entry")) {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

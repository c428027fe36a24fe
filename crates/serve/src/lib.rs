//! mlprof's web UI server (see API.md).

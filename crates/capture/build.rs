//! Generates the tonic client and server for `tensorflow.ProfilerService` from a
//! description written in Rust (`tonic_build::manual`): the messages are prost structs in
//! `src/proto.rs`, so no `.proto` file and no `protoc` are needed.

fn main() {
    let method = |name: &str, route: &str, input: &str, output: &str| {
        tonic_build::manual::Method::builder()
            .name(name)
            .route_name(route)
            .input_type(format!("crate::proto::{input}"))
            .output_type(format!("crate::proto::{output}"))
            .codec_path("tonic_prost::ProstCodec")
            .build()
    };
    let service = tonic_build::manual::Service::builder()
        .name("ProfilerService")
        .package("tensorflow")
        .method(method("profile", "Profile", "ProfileRequest", "ProfileResponse"))
        .method(method("terminate", "Terminate", "TerminateRequest", "TerminateResponse"))
        .method(method("monitor", "Monitor", "MonitorRequest", "MonitorResponse"))
        .build();
    tonic_build::manual::Builder::new().compile(&[service]);
}

//! JSON answers sent while they are serialised: the value is written on a blocking
//! thread into chunks of [`CHUNK_BYTES`] that go out through a small bounded channel, so
//! a large answer (a tool's result on a big profile, a dense trace view) never exists
//! as one contiguous buffer and the first bytes leave before the last are written. The
//! compression layer compresses the chunks as they come.
//!
//! The one design decision to know: the channel holds at most [`CHANNEL_CHUNKS`]
//! chunks, so a slow client slows the serialiser instead of growing memory; a client
//! that goes away makes the next write fail and the serialiser stop.

use std::io::{self, Write};

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Bytes per chunk sent to the client.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Chunks that may wait for the client before the serialiser blocks.
pub const CHANNEL_CHUNKS: usize = 4;

/// `value` as an `application/json` response whose body is streamed as it is serialised.
pub fn json<T: Serialize + Send + 'static>(value: T) -> Response {
    let (sender, receiver) = mpsc::channel(CHANNEL_CHUNKS);
    tokio::task::spawn_blocking(move || {
        let mut writer = ChunkWriter::new(sender);
        let written = serde_json::to_writer(&mut writer, &value).map_err(io::Error::from).and_then(|()| writer.flush());
        if let Err(error) = written {
            // The client has gone, or the value cannot be written as JSON: end the body
            // with an error so the connection is closed instead of ending cleanly.
            let _ = writer.sender.blocking_send(Err(error));
        }
    });
    let body = Body::from_stream(ReceiverStream::new(receiver));
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

/// An `io::Write` that sends full chunks down the channel (from a blocking thread).
struct ChunkWriter {
    sender: mpsc::Sender<io::Result<Bytes>>,
    buffer: Vec<u8>,
}

impl ChunkWriter {
    fn new(sender: mpsc::Sender<io::Result<Bytes>>) -> ChunkWriter {
        ChunkWriter { sender, buffer: Vec::with_capacity(CHUNK_BYTES) }
    }

    fn send_buffer(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buffer, Vec::with_capacity(CHUNK_BYTES));
        self.sender
            .blocking_send(Ok(Bytes::from(chunk)))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client closed the connection"))
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= CHUNK_BYTES {
            self.send_buffer()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_buffer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::to_bytes;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_streamed_body_is_the_serialised_value_in_bounded_chunks() {
        let value: Vec<String> = (0..50_000).map(|i| format!("event number {i}")).collect();
        let expected = serde_json::to_vec(&value).expect("serialise");
        assert!(expected.len() > 4 * CHUNK_BYTES, "the test value spans several chunks");

        let (sender, mut receiver) = mpsc::channel(CHANNEL_CHUNKS);
        let writer_value = value.clone();
        let writing = tokio::task::spawn_blocking(move || {
            let mut writer = ChunkWriter::new(sender);
            serde_json::to_writer(&mut writer, &writer_value).map_err(io::Error::from).and_then(|()| writer.flush())
        });
        let mut received = Vec::new();
        let mut chunks = 0;
        while let Some(chunk) = receiver.recv().await {
            let chunk = chunk.expect("no error chunk");
            assert!(chunk.len() < CHUNK_BYTES + 64 * 1024, "a chunk is about CHUNK_BYTES");
            received.extend_from_slice(&chunk);
            chunks += 1;
        }
        writing.await.expect("joined").expect("written");
        assert_eq!(received, expected);
        assert!(chunks > 4);

        let response = json(value);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let body = to_bytes(response.into_body(), usize::MAX).await.expect("body");
        assert_eq!(body.as_ref(), expected.as_slice());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_goes_away_stops_the_serialiser() {
        let (sender, receiver) = mpsc::channel(CHANNEL_CHUNKS);
        drop(receiver);
        let mut writer = ChunkWriter::new(sender);
        let result =
            tokio::task::spawn_blocking(move || writer.write_all(&vec![b'x'; 2 * CHUNK_BYTES])).await.expect("joined");
        assert_eq!(result.map_err(|e| e.kind()), Err(io::ErrorKind::BrokenPipe));
    }
}

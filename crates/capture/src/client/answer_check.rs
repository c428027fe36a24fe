//! Telling a gRPC answer from any other HTTP answer on the port.
//!
//! A web server that speaks HTTP/2 (a gateway, a web UI, another service's REST API)
//! answers the profile call with an HTTP response that is not gRPC — JSON, HTML, a 404 —
//! and tonic reports it in its own words ("invalid compression flag: 123", a status
//! "mapped from HTTP status code 404"). [`AnswerCheck`] wraps the channel and notes what
//! such an answer was (its HTTP status and `content-type`), so the client can say the
//! port is not a profiler's instead. gRPC answers (`application/grpc…`) pass unnoted.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tonic::codegen::{Service, http};

/// What a port answered instead of gRPC, shared between the service and the caller.
pub type NonGrpcAnswer = Arc<Mutex<Option<String>>>;

/// A service that notes, in a [`NonGrpcAnswer`], a response that is not gRPC.
#[derive(Clone, Debug)]
pub struct AnswerCheck<S> {
    inner: S,
    seen: NonGrpcAnswer,
}

impl<S> AnswerCheck<S> {
    /// Wraps `inner` (a `tonic::transport::Channel`); a non-gRPC answer is noted in `seen`.
    pub fn new(inner: S, seen: NonGrpcAnswer) -> AnswerCheck<S> {
        AnswerCheck { inner, seen }
    }
}

/// How a non-gRPC answer reads in an error: `HTTP 404, content-type application/json`;
/// `None` for a gRPC answer.
pub fn describe_non_grpc<B>(response: &http::Response<B>) -> Option<String> {
    let content_type = response.headers().get(http::header::CONTENT_TYPE).map(|v| v.to_str().unwrap_or("(not text)"));
    if content_type.is_some_and(|t| t.starts_with("application/grpc")) {
        return None;
    }
    let status = response.status().as_u16();
    Some(match content_type {
        Some(kind) => format!("HTTP {status}, content-type {kind}"),
        None => format!("HTTP {status} without a content-type"),
    })
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for AnswerCheck<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let seen = Arc::clone(&self.seen);
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            if let Some(answer) = describe_non_grpc(&response)
                && let Ok(mut slot) = seen.lock()
            {
                *slot = Some(answer);
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, content_type: Option<&str>) -> http::Response<()> {
        let mut builder = http::Response::builder().status(status);
        if let Some(kind) = content_type {
            builder = builder.header("content-type", kind);
        }
        builder.body(()).expect("a response")
    }

    #[test]
    fn grpc_answers_pass_and_others_are_described() {
        assert_eq!(describe_non_grpc(&response(200, Some("application/grpc"))), None);
        assert_eq!(describe_non_grpc(&response(200, Some("application/grpc+proto"))), None);
        assert_eq!(
            describe_non_grpc(&response(200, Some("application/json"))).as_deref(),
            Some("HTTP 200, content-type application/json")
        );
        assert_eq!(describe_non_grpc(&response(404, None)).as_deref(), Some("HTTP 404 without a content-type"));
    }
}

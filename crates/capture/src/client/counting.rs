//! Counting the bytes of a gRPC answer as they arrive, for the "receiving N MB" display.
//!
//! tonic decodes a unary response only once it is complete, so the count has to be taken
//! below it: [`CountingService`] wraps the channel (a tower `Service` over HTTP requests)
//! and gives each response a [`CountingBody`], which adds the length of every HTTP/2 data
//! frame it passes on to a shared [`AtomicU64`]. Nothing else about the call changes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use tonic::codegen::{Bytes, Service, http};

/// A response body that counts its data bytes into a shared counter.
#[derive(Debug)]
pub struct CountingBody<B> {
    inner: B,
    received: Arc<AtomicU64>,
}

impl<B> CountingBody<B> {
    /// Wraps `inner`; every data frame adds its length, in bytes, to `received`.
    pub fn new(inner: B, received: Arc<AtomicU64>) -> CountingBody<B> {
        CountingBody { inner, received }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for CountingBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.received.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A service whose responses carry a [`CountingBody`] sharing one counter.
#[derive(Clone, Debug)]
pub struct CountingService<S> {
    inner: S,
    received: Arc<AtomicU64>,
}

impl<S> CountingService<S> {
    /// Wraps `inner` (e.g. a `tonic::transport::Channel`); response bytes add to `received`.
    pub fn new(inner: S, received: Arc<AtomicU64>) -> CountingService<S> {
        CountingService { inner, received }
    }
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for CountingService<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<CountingBody<ResBody>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let received = Arc::clone(&self.received);
        let response = self.inner.call(request);
        Box::pin(async move { Ok(response.await?.map(|body| CountingBody::new(body, received))) })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::task::{Context, Poll, Waker};

    use http_body::{Body, Frame};
    use tonic::codegen::{Bytes, Service, http};

    use super::{CountingBody, CountingService};

    /// A body that yields prepared frames.
    struct Frames(VecDeque<Frame<Bytes>>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.0.pop_front().map(Ok))
        }
    }

    fn frames() -> Frames {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        Frames(VecDeque::from([
            Frame::data(Bytes::from_static(b"12345")),
            Frame::data(Bytes::from(vec![0u8; 70_000])),
            Frame::trailers(trailers),
        ]))
    }

    /// Drains `body`, returning how many frames it gave.
    fn drain(mut body: impl Body + Unpin) -> usize {
        let mut cx = Context::from_waker(Waker::noop());
        let mut n = 0;
        while let Poll::Ready(Some(_)) = Pin::new(&mut body).poll_frame(&mut cx) {
            n += 1;
        }
        n
    }

    #[test]
    fn counts_data_frames_only_and_passes_everything_on() {
        let received = Arc::new(AtomicU64::new(0));
        let body = CountingBody::new(frames(), Arc::clone(&received));
        assert_eq!(drain(body), 3, "trailers still pass");
        assert_eq!(received.load(Ordering::Relaxed), 70_005);
    }

    /// A service answering every request with [`frames`].
    struct Answer;

    impl Service<http::Request<()>> for Answer {
        type Response = http::Response<Frames>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<http::Response<Frames>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            std::future::ready(Ok(http::Response::new(frames())))
        }
    }

    #[test]
    fn the_service_counts_every_response_into_one_counter() {
        let received = Arc::new(AtomicU64::new(0));
        let mut service = CountingService::new(Answer, Arc::clone(&received));
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..2 {
            let mut call = service.call(http::Request::new(()));
            let Poll::Ready(Ok(response)) = call.as_mut().poll(&mut cx) else { panic!("the answer is ready") };
            drain(response.into_body());
        }
        assert_eq!(received.load(Ordering::Relaxed), 140_010);
    }
}

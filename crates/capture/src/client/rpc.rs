//! One worker's `Profile` call: attempts, retries and the deadline, as TensorFlow's client
//! does them (`tsl/profiler/rpc/client/capture_profile.cc`, `profiler_client.cc`).
//!
//! Each attempt opens its own plaintext HTTP/2 connection, so a server that restarts
//! between attempts is found again. The deadline bounds the whole attempt (connecting
//! included) with a local timer, and also travels to the server as `grpc-timeout` so it
//! stops tracing for a client that has gone. A failure is retried only when the reference
//! would retry it ([`CaptureError::is_retryable`]), after a short pause.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tonic::transport::Endpoint;

use super::answer_check::{AnswerCheck, NonGrpcAnswer};
use super::counting::CountingService;
use super::error::CaptureError;
use super::progress::{Progress, WorkerState};
use crate::address::Target;
use crate::proto::{ProfileRequest, ProfileResponse};
use crate::service::profiler_service_client::ProfilerServiceClient;

/// The largest answer accepted, in bytes: protobuf's 2 GiB limit, as TensorFlow's client
/// sets it (`MaxReceiveMessageSize = INT32_MAX`; tonic's default is only 4 MiB).
pub const MAX_MESSAGE_BYTES: usize = i32::MAX as usize;

/// How often the bytes received so far are reported while an answer arrives.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(200);

/// The reference deadline of one attempt: max(60 s, 2 × `duration`) + `delay`.
pub fn reference_deadline(duration: Duration, delay: Duration) -> Duration {
    Duration::from_secs(60).max(duration.saturating_mul(2)).saturating_add(delay)
}

/// How one worker's attempts run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RetryPlan {
    /// Attempts in all (at least 1).
    pub attempts: u32,
    /// Deadline of each attempt.
    pub deadline: Duration,
    /// Pause before a retry.
    pub pause: Duration,
}

/// Calls `Profile` on `target` until an attempt succeeds with a non-empty trace, fails in a
/// way not worth retrying, or `plan.attempts` are spent. `request(n)` builds the request of
/// attempt `n` (from 1). Returns the last result and the number of attempts made.
pub(crate) async fn profile_with_retries(
    target: &Target,
    plan: RetryPlan,
    token: Option<&str>,
    progress: &dyn Progress,
    mut request: impl FnMut(u32) -> ProfileRequest,
) -> (Result<ProfileResponse, CaptureError>, u32) {
    let attempts = plan.attempts.max(1);
    let mut attempt = 1;
    loop {
        progress.update(target, WorkerState::Connecting { attempt, attempts });
        let result = match profile_once(target, request(attempt), plan.deadline, token, progress).await {
            Ok(response) if response.empty_trace => Err(CaptureError::EmptyTrace),
            other => other,
        };
        match result {
            Err(error) if error.is_retryable() && attempt < attempts => {
                progress.update(target, WorkerState::Retrying { attempt, reason: error.to_string() });
                tokio::time::sleep(plan.pause).await;
                attempt += 1;
            }
            result => return (result, attempt),
        }
    }
}

/// One attempt, bounded by `deadline`, reporting the bytes received while it runs.
async fn profile_once(
    target: &Target,
    request: ProfileRequest,
    deadline: Duration,
    token: Option<&str>,
    progress: &dyn Progress,
) -> Result<ProfileResponse, CaptureError> {
    let received = Arc::new(AtomicU64::new(0));
    let call = call(target, request, deadline, token, Arc::clone(&received), progress);
    let watched = report_bytes(call, &received, target, progress);
    tokio::time::timeout(deadline, watched).await.unwrap_or(Err(CaptureError::Timeout { after: deadline }))
}

/// Connects and makes the call, counting the answer's bytes into `received`.
async fn call(
    target: &Target,
    request: ProfileRequest,
    deadline: Duration,
    token: Option<&str>,
    received: Arc<AtomicU64>,
    progress: &dyn Progress,
) -> Result<ProfileResponse, CaptureError> {
    let endpoint = Endpoint::from_shared(target.uri())
        .map_err(|e| CaptureError::Connect { detail: e.to_string() })?
        .tcp_nodelay(true)
        .http2_adaptive_window(true);
    let channel = endpoint.connect().await.map_err(|e| CaptureError::from_transport(&e, deadline))?;
    progress.update(target, WorkerState::Tracing);
    let non_grpc = NonGrpcAnswer::default();
    let checked = AnswerCheck::new(channel, Arc::clone(&non_grpc));
    let mut client = ProfilerServiceClient::new(CountingService::new(checked, received))
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
    let mut request = tonic::Request::new(request);
    request.set_timeout(deadline);
    if let Some(token) = token {
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|_| CaptureError::Connect { detail: "the token is not printable ASCII".into() })?;
        request.metadata_mut().insert("authorization", value);
    }
    let response = client.profile(request).await.map_err(|status| {
        // A web server's answer is said as such, not in the decoder's words.
        match non_grpc.lock().ok().and_then(|mut seen| seen.take()) {
            Some(answer) => CaptureError::Protocol { detail: answer },
            None => CaptureError::from_transport(&status, deadline),
        }
    })?;
    Ok(response.into_inner())
}

/// Runs `work`, reporting [`WorkerState::Receiving`] whenever `received` has grown, and
/// once more at the end if it grew since the last report (so the total is always shown).
async fn report_bytes<T>(
    work: impl Future<Output = T>,
    received: &AtomicU64,
    target: &Target,
    progress: &dyn Progress,
) -> T {
    let mut work = std::pin::pin!(work);
    let mut ticks = tokio::time::interval(PROGRESS_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reported = 0;
    let report = |reported: &mut u64| {
        let bytes = received.load(Ordering::Relaxed);
        if bytes != *reported {
            *reported = bytes;
            progress.update(target, WorkerState::Receiving { bytes });
        }
    };
    loop {
        tokio::select! {
            done = &mut work => {
                report(&mut reported);
                return done;
            }
            _ = ticks.tick() => report(&mut reported),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::reference_deadline;
    use std::time::Duration;

    #[test]
    fn deadline_is_the_reference_one() {
        let s = Duration::from_secs;
        assert_eq!(reference_deadline(s(2), s(0)), s(60));
        assert_eq!(reference_deadline(s(2), Duration::from_millis(1500)), Duration::from_millis(61_500));
        assert_eq!(reference_deadline(s(45), s(0)), s(90));
        assert_eq!(reference_deadline(s(100), s(5)), s(205));
    }
}

//! Accepting and serving connections so that silent, slow or too many clients cannot
//! starve the others: each connection is served by hyper's HTTP/1.1 connection with a
//! header-read timeout, and at most [`Limits::max_connections`] are open at once.
//!
//! The one design decision: a connection is *idle* while it has no request in flight —
//! before its first request, between keep-alive requests, and while it is still sending
//! a request's headers. Only idle time is limited ([`DEFAULT_HEADER_READ_TIMEOUT`]), and
//! only idle connections are closed to make room when every slot is taken (the one idle
//! the longest first; when none is idle, the new connection waits in the listen queue
//! until one finishes). Once a request's headers are in, nothing limits how long its
//! answer takes: loading a multi-GB profile or streaming a large JSON answer is never cut.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::{Service as _, service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};

/// How long a connection may take to send complete request headers, counted from when
/// it opened or when its previous answer was sent: a connection that sends nothing, a
/// keep-alive connection left idle and one sending its headers a byte at a time
/// (slowloris) are all closed after it. 10 s.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How many connections are open at once, at most. A browser opens about six; beyond
/// this, the connection idle the longest is closed to make room. Half the common soft
/// limit of 1,024 open files, so profiles and indexes can still be opened.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// How long accepting pauses after an error other than a refused, aborted or reset
/// connection (e.g. out of file descriptors), so the loop does not spin on it.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// How long a connection waiting for a slot waits before looking again for an idle
/// connection to close (when none was idle, or the one told to close became busy).
const ADMISSION_RETRY: Duration = Duration::from_millis(50);

/// The bounds on connections (see [`DEFAULT_HEADER_READ_TIMEOUT`] and
/// [`DEFAULT_MAX_CONNECTIONS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How long an idle connection may take to send complete request headers.
    pub header_read_timeout: Duration,
    /// How many connections are open at once, at most (at least 1).
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT, max_connections: DEFAULT_MAX_CONNECTIONS }
    }
}

/// Serves `app` on the connections `listener` accepts until `shutdown` completes, then
/// closes the connections waiting for a request, lets the requests being received or
/// answered finish and returns.
pub(crate) async fn serve(listener: TcpListener, app: Router, limits: Limits, shutdown: impl Future<Output = ()>) {
    let max_connections = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
    let slots = Arc::new(Semaphore::new(max_connections));
    let registry = Arc::new(Registry::default());
    let (stop, stopped) = watch::channel(());
    let app = TowerToHyperService::new(app);
    tokio::pin!(shutdown);
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _peer)) => tcp,
                Err(error) => {
                    if !is_connection_error(&error) {
                        tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let slot = tokio::select! {
            slot = admit(&slots, &registry) => slot,
            () = &mut shutdown => break,
        };
        let Some(slot) = slot else { break };
        let connection = Registered::new(&registry);
        tokio::spawn(serve_connection(tcp, slot, connection, app.clone(), limits.header_read_timeout, stopped.clone()));
    }
    drop(listener);
    // Every connection sees the change; one that ended already has nothing to see.
    let _ = stop.send(());
    // Each connection holds a slot until it ends.
    let _ = slots.acquire_many(max_connections as u32).await;
}

/// Whether an accept error concerns only that one connection.
fn is_connection_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(error.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset)
}

/// A slot for a new connection: a free one, else one an idle connection gives up when
/// told to close; `None` if the slots were closed (they never are).
async fn admit(slots: &Arc<Semaphore>, registry: &Registry) -> Option<OwnedSemaphorePermit> {
    loop {
        if let Ok(slot) = Arc::clone(slots).try_acquire_owned() {
            return Some(slot);
        }
        registry.close_longest_idle();
        match tokio::time::timeout(ADMISSION_RETRY, Arc::clone(slots).acquire_owned()).await {
            Ok(Ok(slot)) => return Some(slot),
            Ok(Err(_closed)) => return None,
            Err(_elapsed) => {}
        }
    }
}

/// Serves one connection until it ends, is closed to make room, or the server stops.
async fn serve_connection(
    tcp: TcpStream,
    _slot: OwnedSemaphorePermit,
    connection: Registered,
    app: TowerToHyperService<Router>,
    header_read_timeout: Duration,
    mut stopped: watch::Receiver<()>,
) {
    // Answers are written in several pieces (headers, body chunks, the last chunk); with
    // Nagle's algorithm a later one waits for the client's delayed ACK of the earlier one,
    // about 40 ms per request on a keep-alive connection. Failing to set it only costs
    // that latency, so the connection is served anyway.
    let _ = tcp.set_nodelay(true);
    let tracker = Arc::clone(&connection.tracker);
    let service = service_fn(move |request: hyper::Request<Incoming>| {
        let in_flight = InFlight::start(&tracker);
        let answer = app.call(request);
        async move {
            let response = answer.await?;
            Ok::<_, Infallible>(response.map(|body| Tracked { body, _in_flight: in_flight }))
        }
    });
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
    let served = builder.serve_connection(TokioIo::new(tcp), service);
    tokio::pin!(served);
    let mut stopping = false;
    loop {
        tokio::select! {
            // An error here is the client's (gone, too slow, malformed): nothing to report.
            _ = served.as_mut() => break,
            () = connection.tracker.close.notified() => {
                if connection.tracker.is_idle() {
                    break;
                }
            }
            // hyper closes a connection at once if it has received nothing since its last
            // answer, and otherwise after the answer to the request being received (whose
            // headers still have to arrive within the timeout).
            _ = stopped.changed(), if !stopping => {
                stopping = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The open connections, to choose one to close when every slot is taken.
#[derive(Default)]
struct Registry {
    /// The open connections by number.
    open: Mutex<HashMap<u64, Arc<Tracker>>>,
    /// Numbers connections and orders the moments they became idle.
    clock: Arc<AtomicU64>,
}

impl Registry {
    /// Tells the connection idle the longest to close; false when none is idle.
    fn close_longest_idle(&self) -> bool {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let longest = open.values().filter(|tracker| tracker.is_idle()).min_by_key(|tracker| tracker.idle_since());
        if let Some(tracker) = longest {
            tracker.close.notify_one();
        }
        longest.is_some()
    }
}

/// What the registry knows of one connection.
struct Tracker {
    /// Requests whose answer is not completely sent yet.
    in_flight: AtomicUsize,
    /// When the connection last became idle, on the registry's clock.
    idle_since: AtomicU64,
    /// The registry's clock.
    clock: Arc<AtomicU64>,
    /// Told to close (which it does only if idle).
    close: Notify,
}

impl Tracker {
    /// Whether no request is in flight.
    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0
    }

    /// When the connection last became idle, on the registry's clock.
    fn idle_since(&self) -> u64 {
        self.idle_since.load(Ordering::SeqCst)
    }
}

/// A connection's place in the registry, given up when it ends.
struct Registered {
    registry: Arc<Registry>,
    id: u64,
    tracker: Arc<Tracker>,
}

impl Registered {
    /// Registers a new, idle connection.
    fn new(registry: &Arc<Registry>) -> Registered {
        let id = registry.clock.fetch_add(1, Ordering::SeqCst);
        let tracker = Arc::new(Tracker {
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(id),
            clock: Arc::clone(&registry.clock),
            close: Notify::new(),
        });
        registry.open.lock().unwrap_or_else(PoisonError::into_inner).insert(id, Arc::clone(&tracker));
        Registered { registry: Arc::clone(registry), id, tracker }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.open.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
    }
}

/// One request in flight on a connection, from its headers until its answer is sent
/// (or abandoned).
struct InFlight(Arc<Tracker>);

impl InFlight {
    fn start(tracker: &Arc<Tracker>) -> InFlight {
        tracker.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(Arc::clone(tracker))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let tracker = &self.0;
        // Stamped before the count drops, so an idle connection always has its moment.
        if tracker.in_flight.load(Ordering::SeqCst) == 1 {
            tracker.idle_since.store(tracker.clock.fetch_add(1, Ordering::SeqCst), Ordering::SeqCst);
        }
        tracker.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An answer's body that keeps its request in flight until hyper has sent it all.
struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_idle_the_longest_is_told_to_close_never_a_busy_one() {
        let registry = Arc::new(Registry::default());
        let first = Registered::new(&registry);
        let second = Registered::new(&registry);
        let third = Registered::new(&registry);
        // The first is busy; the third went idle after a request, so the second has been
        // idle the longest.
        let busy = InFlight::start(&first.tracker);
        drop(InFlight::start(&third.tracker));
        assert!(registry.close_longest_idle());
        assert_eq!(told_to_close(&registry), vec![second.id]);
        drop(second);
        assert!(registry.close_longest_idle());
        assert_eq!(told_to_close(&registry), vec![third.id]);
        drop(third);
        assert!(!registry.close_longest_idle(), "the only connection left is busy");
        drop(busy);
        assert!(first.tracker.is_idle());
    }

    /// Serves `app` on an ephemeral port of 127.0.0.1 in the background until the
    /// returned sender is dropped.
    async fn serve_in_background(
        app: Router,
        limits: Limits,
    ) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bound");
        let address = listener.local_addr().expect("an address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, app, limits, async move {
            let _ = stopped.await;
        }));
        (address, stop)
    }

    /// `GET target` with `Connection: close`: the whole answer as text (30 s timeout).
    async fn get(address: std::net::SocketAddr, target: &str) -> String {
        let request = format!("GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        tokio::task::spawn_blocking(move || {
            use std::io::{Read, Write};
            let mut stream = std::net::TcpStream::connect(address).expect("connected");
            stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout set");
            stream.write_all(request.as_bytes()).expect("sent");
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).expect("read");
            String::from_utf8_lossy(&answer).into_owned()
        })
        .await
        .expect("the client ran")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_that_take_longer_than_the_header_timeout_are_not_cut() {
        use axum::routing::get as route_get;
        use tokio_stream::wrappers::ReceiverStream;
        let app = Router::new()
            .route(
                "/slow",
                route_get(|| async {
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    "a slow answer"
                }),
            )
            .route(
                "/streamed",
                route_get(|| async {
                    let (parts, received) = tokio::sync::mpsc::channel(1);
                    tokio::spawn(async move {
                        for part in 0..4 {
                            tokio::time::sleep(Duration::from_millis(400)).await;
                            if parts.send(Ok::<_, Infallible>(format!("part {part};"))).await.is_err() {
                                return;
                            }
                        }
                    });
                    Body::from_stream(ReceiverStream::new(received))
                }),
            );
        let limits = Limits { header_read_timeout: Duration::from_millis(300), max_connections: 4 };
        let (address, _stop) = serve_in_background(app, limits).await;
        let slow = get(address, "/slow").await;
        assert!(slow.starts_with("HTTP/1.1 200") && slow.ends_with("a slow answer"), "{slow:?}");
        let streamed = get(address, "/streamed").await;
        assert!(streamed.starts_with("HTTP/1.1 200"), "{streamed:?}");
        for part in 0..4 {
            assert!(streamed.contains(&format!("part {part};")), "{streamed:?}");
        }
    }

    /// The connections told to close since the last call (consuming the notice).
    fn told_to_close(registry: &Registry) -> Vec<u64> {
        let open = registry.open.lock().unwrap_or_else(PoisonError::into_inner);
        let mut told: Vec<u64> = open
            .iter()
            .filter(|(_, tracker)| {
                let notified = tracker.close.notified();
                tokio::pin!(notified);
                notified.as_mut().enable()
            })
            .map(|(id, _)| *id)
            .collect();
        told.sort_unstable();
        told
    }
}

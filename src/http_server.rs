//! The accept loop of the relay and of `airlock serve`: HTTP/1.1 connections with a header
//! timeout, a keep-alive (idle) timeout and a connection cap, so idle, half-sent or stalled
//! clients cannot hold the server's sockets (issue 10, item 14); and the shutdown signal both
//! wait for. The body timeout is applied where a body is read (the relay's `proxy`, serve's
//! bundle upload), and here to answers: a client that takes no byte of its answer for that long
//! has its connection closed. [`BodyBudget`] bounds the request bodies both hold in memory, all
//! connections together.

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How long clients may take and how many may be connected at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A request head must be complete this long after the relay starts waiting for it (on a new
    /// connection, and after each response on a kept-alive one).
    pub header_timeout: Duration,
    /// A connection on which the client sends nothing and no request is in progress is closed
    /// after this long (before its first request or between requests).
    pub keep_alive_timeout: Duration,
    /// A request body must be complete this long after its head arrived, else `408`. An answer
    /// the client takes no byte of for this long (it stopped reading) closes the connection.
    pub body_timeout: Duration,
    /// Connections served at once; further clients wait in the listen backlog until one closes.
    /// Lowered at start so that twice this many descriptors (client and upstream sockets) fit
    /// under the process's open-file limit.
    pub max_connections: usize,
    /// Request bodies held in memory at once, all connections together, in MiB: the
    /// [`BodyBudget`] of the server (raised, if need be, to the largest body it accepts).
    pub body_memory_mib: u32,
}

/// The default of [`ConnectionLimits::body_memory_mib`] (`--max-body-memory-mib`).
pub const DEFAULT_BODY_MEMORY_MIB: u32 = 256;

/// The largest `--max-body-memory-mib` (1 TiB): past it the KiB count would not fit the budget.
pub const MAX_BODY_MEMORY_MIB: u32 = 1 << 20;

impl Default for ConnectionLimits {
    /// 10 s header, 5 s keep-alive, 30 s body, 512 connections, 256 MiB of bodies.
    fn default() -> Self {
        ConnectionLimits {
            header_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(30),
            max_connections: 512,
            body_memory_mib: DEFAULT_BODY_MEMORY_MIB,
        }
    }
}

impl ConnectionLimits {
    /// The budget of request bodies these limits allow, for a server whose largest body is
    /// `largest` bytes (one such body always fits).
    pub fn body_budget(&self, largest: u64) -> BodyBudget {
        let kib = (u64::from(self.body_memory_mib.min(MAX_BODY_MEMORY_MIB)) * 1024)
            .max(largest.div_ceil(1024));
        BodyBudget::new(u32::try_from(kib).unwrap_or(u32::MAX))
    }

    /// Why `--max-body-memory-mib` is too small for a server whose largest body is `largest`
    /// bytes (`what`: "serve's JSON bodies"), if it is.
    pub fn body_memory_too_small(&self, largest: u64, what: &str) -> Option<String> {
        let need = largest.div_ceil(1 << 20);
        (u64::from(self.body_memory_mib) < need).then(|| {
            format!(
                "--max-body-memory-mib {} is less than one of {what} ({need} MiB): give at least {need}",
                self.body_memory_mib
            )
        })
    }
}

/// Descriptors kept free for the outbox, the runtime, logs and the listener.
const RESERVED_FDS: u64 = 64;

/// The connection cap actually used: `requested`, lowered so that a client socket and an upstream
/// socket per connection fit under the soft open-file limit (`ulimit -n`), at least 4.
pub fn effective_connection_cap(requested: usize) -> usize {
    let room = open_file_limit()
        .map(|soft| (soft.saturating_sub(RESERVED_FDS) / 2).max(4))
        .unwrap_or(u64::MAX);
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    requested.clamp(1, room.max(1))
}

fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        if rc == 0 && lim.rlim_cur != libc::RLIM_INFINITY {
            return Some(lim.rlim_cur);
        }
    }
    None
}

/// Serves `router` on `listener` until `shutdown` resolves; then stops accepting, lets in-flight
/// requests finish and closes idle connections, and returns once every connection is closed.
pub async fn serve_connections(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let cap = effective_connection_cap(limits.max_connections);
    if cap < limits.max_connections {
        tracing::warn!(
            requested = limits.max_connections,
            cap,
            "connection cap lowered to fit the open-file limit (ulimit -n)"
        );
    }
    let permits = Arc::new(Semaphore::new(cap));
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, peer)) => {
                let router = router.clone();
                let stop = stop_rx.clone();
                tokio::spawn(serve_one(stream, peer, router, limits, permit, stop));
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning; idle connections are being
                // reaped by their timeouts meanwhile.
                tracing::warn!(error = %e, "accept failed; retrying shortly");
                drop(permit);
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Every connection holds a permit until it has closed.
    let all = u32::try_from(cap).unwrap_or(u32::MAX);
    let _ = permits.acquire_many(all).await;
}

async fn serve_one(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: ConnectionLimits,
    _permit: OwnedSemaphorePermit,
    mut stop: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let tower = TowerToHyperService::new(router.into_service::<Incoming>());
    let tracker = activity.clone();
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        let busy = tracker.begin_request();
        let answer = hyper::service::Service::call(&tower, req);
        async move {
            let r = answer.await;
            drop(busy);
            r
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let mut closing = false;
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "connection closed with an error");
                }
                break;
            }
            _ = activity.idle_for(limits.keep_alive_timeout), if !closing => {
                tracing::debug!(%peer, "idle connection closed");
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
            _ = stop.changed(), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
            // A client that stops reading its answer would hold the connection, and a graceful
            // stop (which lets answers finish), for ever: its socket is closed instead.
            _ = activity.write_stalled_for(limits.body_timeout) => {
                tracing::debug!(%peer, "the client stopped taking its answer; connection closed");
                break;
            }
        }
    }
}

/// The body length a request declares: its `Content-Length` (if valid), and 0 when it has neither
/// `Content-Length` nor `Transfer-Encoding` (a request framed by neither has no body, RFC 9112
/// 6.3, and hyper reads none). `None` when the length is not known before the body is read
/// (chunked).
pub fn declared_length(headers: &axum::http::HeaderMap) -> Option<u64> {
    use axum::http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
    if headers.contains_key(TRANSFER_ENCODING) {
        return None;
    }
    match headers.get(CONTENT_LENGTH) {
        Some(v) => v.to_str().ok().and_then(|v| v.parse::<u64>().ok()),
        None => Some(0),
    }
}

/// Appends `chunk` to `out`, a request body's buffer, without outgrowing the share of the
/// [`BodyBudget`] the body reserved: the buffer is sized once for a body that `declared` its
/// length, and for one without a length grows by doubling but never past `limit` (a plain `Vec`
/// could double a 40 MiB body's buffer to 80 MiB; collecting the chunks and copying them into one
/// buffer would hold the body twice).
pub fn append_within(out: &mut Vec<u8>, chunk: &[u8], declared: Option<u64>, limit: u64) {
    let need = out.len() + chunk.len();
    if need > out.capacity() {
        let at_most = |n: u64| usize::try_from(n.min(limit)).unwrap_or(usize::MAX);
        let target = match declared {
            Some(n) => at_most(n),
            None => at_most(out.capacity() as u64 * 2),
        };
        out.reserve_exact(target.max(need) - out.len());
    }
    out.extend_from_slice(chunk);
}

/// Request bodies held in memory at once, all connections together: one semaphore permit per KiB
/// (the relay's forwarded bodies, serve's JSON bodies). Without it every connection the cap allows
/// could hold a body of the per-request limit. A body reserves its share before any byte of it is
/// read ([`BodyBudget::reserve`]): its declared `Content-Length`, nothing when it has neither that
/// nor `Transfer-Encoding` (no body: a GET), or the per-request limit when its length is not known
/// (chunked), and it is read no further than that; once read, it keeps only its real size. hyper delivers exactly the
/// declared length, and drops `Content-Length` when `Transfer-Encoding` is present, so a declared
/// length bounds the body. A request that finds the budget taken waits a while for room, then is
/// refused ([`BudgetTaken`]: the caller answers 503 with `Retry-After`).
#[derive(Clone)]
pub struct BodyBudget {
    permits: Arc<Semaphore>,
    total_kib: u32,
}

/// A body's share of a [`BodyBudget`], given back when dropped.
pub struct BodyShare(OwnedSemaphorePermit);

/// The budget stayed taken for as long as the request was willing to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetTaken {
    /// The whole budget, in KiB.
    pub total_kib: u32,
    /// The share the body asked for, in KiB.
    pub wanted_kib: u32,
    /// How long it waited for room.
    pub waited: Duration,
}

/// What a request refused for want of budget is told to wait before it retries (`Retry-After`,
/// in seconds): it has already waited for room, and bodies finish or are cut off continually.
pub const BUDGET_RETRY_AFTER_SECS: u32 = 1;

impl BodyBudget {
    /// A budget of `total_kib` KiB (at least 1).
    pub fn new(total_kib: u32) -> BodyBudget {
        let total_kib = total_kib.max(1);
        BodyBudget {
            permits: Arc::new(Semaphore::new(total_kib as usize)),
            total_kib,
        }
    }

    pub fn total_kib(&self) -> u32 {
        self.total_kib
    }

    /// KiB currently reserved by bodies.
    pub fn held_kib(&self) -> u32 {
        let free = u32::try_from(self.permits.available_permits()).unwrap_or(u32::MAX);
        self.total_kib.saturating_sub(free)
    }

    /// The share of a body: its declared length, at most `limit`; `limit` when it declares none.
    /// At most the whole budget; nothing for a body known to be empty (a GET without one).
    pub fn share_kib(&self, declared: Option<u64>, limit: u64) -> u32 {
        let bytes = declared.map_or(limit, |n| n.min(limit));
        u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(self.total_kib)
            .min(self.total_kib)
    }

    /// Reserves the share of a body ([`BodyBudget::share_kib`]), waiting up to `wait` for room;
    /// [`BudgetTaken`] when none came. Waiters are served in order.
    pub async fn reserve(
        &self,
        declared: Option<u64>,
        limit: u64,
        wait: Duration,
    ) -> Result<BodyShare, BudgetTaken> {
        let kib = self.share_kib(declared, limit);
        let acquire = self.permits.clone().acquire_many_owned(kib);
        match tokio::time::timeout(wait, acquire).await {
            Ok(Ok(permit)) => Ok(BodyShare(permit)),
            _ => Err(BudgetTaken {
                total_kib: self.total_kib,
                wanted_kib: kib,
                waited: wait,
            }),
        }
    }
}

impl BodyShare {
    /// KiB this share holds.
    pub fn kib(&self) -> u32 {
        u32::try_from(self.0.num_permits()).unwrap_or(u32::MAX)
    }

    /// Bytes this share covers.
    pub fn bytes(&self) -> u64 {
        u64::from(self.kib()) * 1024
    }

    /// Gives back what `bytes` do not need: once a body's size is known (one read without a
    /// declared length), it holds only that much (nothing for an empty one). Never grows the share.
    pub fn shrink_to(&mut self, bytes: u64) {
        let keep = usize::try_from(bytes.div_ceil(1024)).unwrap_or(usize::MAX);
        let held = self.0.num_permits();
        if keep < held {
            drop(self.0.split(held - keep));
        }
    }
}

/// When a connection last saw bytes or finished a request, how many requests are in progress, and
/// since when a write to the client has been waiting.
struct Activity {
    base: Instant,
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
    /// 1 + the time (ms since `base`) a write first found the client's socket full, while no
    /// write has gone through since; 0 while writes go through.
    write_blocked_ms: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            base: Instant::now(),
            last_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            write_blocked_ms: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }

    fn touch(&self) {
        self.last_ms.fetch_max(self.now_ms(), Ordering::Relaxed);
    }

    /// A write went through (`true`) or found the socket full (`false`).
    fn wrote(&self, progressed: bool) {
        if progressed {
            self.touch();
            self.write_blocked_ms.store(0, Ordering::Relaxed);
        } else {
            let since = self.now_ms() + 1;
            let _ = self.write_blocked_ms.compare_exchange(
                0,
                since,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// Resolves once a write has waited `limit` without any write going through (the client
    /// stopped reading); checked at least every `limit`.
    async fn write_stalled_for(&self, limit: Duration) {
        loop {
            let blocked = self.write_blocked_ms.load(Ordering::Relaxed);
            if blocked == 0 {
                tokio::time::sleep(limit).await;
                continue;
            }
            let deadline = self.base + Duration::from_millis(blocked - 1) + limit;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }

    fn begin_request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// Resolves once nothing happened for `limit` while no request was in progress.
    async fn idle_for(&self, limit: Duration) {
        loop {
            let last = self.base + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let busy = self.in_flight.load(Ordering::Relaxed) > 0;
            let deadline = last + limit;
            if !busy && Instant::now() >= deadline {
                return;
            }
            let wake = if busy {
                Instant::now() + limit
            } else {
                deadline
            };
            tokio::time::sleep_until(wake).await;
        }
    }
}

/// A request in progress; finishing it counts as activity.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A socket that records when bytes last moved, and since when a write has been waiting.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl Watched {
    fn note_write(&self, r: &Poll<std::io::Result<usize>>) {
        match r {
            Poll::Ready(Ok(n)) if *n > 0 => self.activity.wrote(true),
            Poll::Pending => self.activity.wrote(false),
            _ => {}
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        self.note_write(&r);
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note_write(&r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Resolves at the first SIGINT or SIGTERM ([`watch_signals`]: a second one, while the service
/// shuts down, ends the process at once with 128 + its number).
pub async fn shutdown_signal(service: &'static str) {
    match watch_signals(service) {
        Ok(rx) => {
            first_signal(rx).await;
        }
        Err(e) => {
            tracing::warn!("cannot watch SIGINT and SIGTERM: {e}");
            std::future::pending::<()>().await
        }
    }
}

/// The name of the first SIGINT or SIGTERM, once one came ([`watch_signals`]).
pub type SignalWatch = tokio::sync::watch::Receiver<Option<&'static str>>;

/// The first SIGINT or SIGTERM asks for a graceful stop (the receiver then holds its name); a
/// second one, while that stop runs, ends the process at once with status 128 + its number (130
/// for SIGINT, 143 for SIGTERM), without waiting for requests, imports or jobs in progress.
#[cfg(unix)]
pub fn watch_signals(service: &'static str) -> std::io::Result<SignalWatch> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let (tx, rx) = tokio::sync::watch::channel(None);
    tokio::spawn(async move {
        loop {
            let (name, status) = tokio::select! {
                Some(()) = int.recv() => ("SIGINT", 130),
                Some(()) = term.recv() => ("SIGTERM", 143),
                else => return,
            };
            on_signal(&tx, service, name, status);
        }
    });
    Ok(rx)
}

#[cfg(not(unix))]
pub fn watch_signals(service: &'static str) -> std::io::Result<SignalWatch> {
    let (tx, rx) = tokio::sync::watch::channel(None);
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            on_signal(&tx, service, "Ctrl-C", 130);
        }
    });
    Ok(rx)
}

/// The first signal is published; a second one exits with `status` there and then.
fn on_signal(
    tx: &tokio::sync::watch::Sender<Option<&'static str>>,
    service: &str,
    name: &'static str,
    status: i32,
) {
    if tx.borrow().is_some() {
        eprintln!(
            "{service}: {name} received again during the shutdown: exiting now with status {status}, without waiting for requests, imports or jobs in progress"
        );
        std::process::exit(status);
    }
    tracing::info!("{name} received; shutting down");
    tx.send_replace(Some(name));
}

/// Resolves with the first signal's name (never, should the watcher be gone without one).
pub async fn first_signal(mut rx: SignalWatch) -> &'static str {
    // The borrow ends before any other await (it is not Send).
    let first = rx.wait_for(Option::is_some).await.map(|name| *name);
    match first {
        Ok(name) => name.unwrap_or("a signal"),
        Err(_) => std::future::pending().await,
    }
}

/// How long a service's exit waits for work left on the runtime's blocking threads (a store call
/// that never returns must not hold the exit).
pub const BLOCKING_GRACE: Duration = Duration::from_secs(5);

/// Ends a service's runtime once its work is done: a SIGINT or SIGTERM from now on ends the process
/// at once (the runtime's signal watcher is going away), and work still on the blocking threads is
/// waited for at most [`BLOCKING_GRACE`].
pub fn finish_runtime(rt: tokio::runtime::Runtime) {
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of two signals; no handler or memory is involved.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
    }
    rt.shutdown_timeout(BLOCKING_GRACE);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body's buffer never holds more than its share: sized once to a declared length, and
    /// without one grown by doubling up to the limit, not past it.
    #[test]
    fn a_body_buffer_stays_within_its_share() {
        let chunk = [7u8; 7 * 1024];
        let mut out = Vec::new();
        for _ in 0..14 {
            append_within(&mut out, &chunk, Some(98 * 1024), 1 << 20);
            assert_eq!(out.capacity(), 98 * 1024);
        }
        let limit = 50 * 1024;
        let mut out = Vec::new();
        for _ in 0..7 {
            append_within(&mut out, &chunk, None, limit);
            assert!(out.capacity() <= limit as usize, "{}", out.capacity());
        }
        assert_eq!(out.len(), 49 * 1024);
        assert!(out.iter().all(|&b| b == 7));
        // A plain Vec would have doubled to 56 KiB and then 112 KiB.
        assert_eq!(out.capacity(), limit as usize);
    }

    #[test]
    fn the_cap_fits_the_open_file_limit() {
        let soft = open_file_limit();
        let cap = effective_connection_cap(1_000_000);
        if let Some(soft) = soft {
            assert!((cap as u64) * 2 + RESERVED_FDS <= soft.max(RESERVED_FDS + 8));
        }
        assert_eq!(effective_connection_cap(3), 3);
        assert_eq!(effective_connection_cap(0), 1);
    }

    #[tokio::test]
    async fn a_body_takes_its_declared_share_or_the_limit_and_gives_back_what_it_did_not_use() {
        let budget = BodyBudget::new(100);
        let limit = 40 * 1024;
        assert_eq!(budget.share_kib(Some(0), limit), 0);
        assert_eq!(budget.share_kib(Some(1), limit), 1);
        assert_eq!(budget.share_kib(Some(1025), limit), 2);
        assert_eq!(budget.share_kib(Some(u64::MAX), limit), 40);
        assert_eq!(budget.share_kib(None, limit), 40);
        assert_eq!(budget.share_kib(None, u64::MAX), 100);
        let wait = Duration::from_millis(10);
        let mut a = budget.reserve(None, limit, wait).await.unwrap();
        let b = budget.reserve(None, limit, wait).await.unwrap();
        assert_eq!(budget.held_kib(), 80);
        let refused = budget.reserve(None, limit, wait).await.err().unwrap();
        assert_eq!((refused.total_kib, refused.wanted_kib), (100, 40));
        assert_eq!(budget.held_kib(), 80, "a refused request holds nothing");
        // `a` turned out to be 3 KiB long: the rest is free again, and never taken back.
        a.shrink_to(3 * 1024);
        assert_eq!((a.kib(), budget.held_kib()), (3, 43));
        a.shrink_to(10 * 1024);
        assert_eq!(a.kib(), 3);
        let c = budget.reserve(None, limit, wait).await.unwrap();
        drop((a, b));
        assert_eq!(budget.held_kib(), c.kib());
        drop(c);
        assert_eq!(budget.held_kib(), 0);
    }
}

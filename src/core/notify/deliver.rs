//! The delivery runner: sends due deliveries (webhooks over HTTP or HTTPS, NATS with JetStream acks), records
//! every attempt, schedules retries (1, 2, 4, 8, 16 s after each failure), dead-letters after the
//! sixth attempt and publishes dead letters on `export.airgap.ready.dlq`.
//!
//! Durability: a delivery is claimed (committed) before it is sent, and marked delivered as soon as
//! its receiver's 2xx or JetStream's ack arrives (not when the rest of its batch is done). While the
//! claim is younger than [`store::CLAIM_LEASE_MS`] no other runner sends it (a second `notify run`,
//! `serve`, another machine on a shared PostgreSQL store). A process killed in between leaves it
//! pending with its claim; a later run on the same host sends it again at once (the claim records
//! its holder, which is then provably gone), a run on another host once the claim has expired (at
//! least once; receivers de-duplicate on export_id, JetStream on `Nats-Msg-Id`). A runner whose
//! claim expired and was taken over does not record its result ([`AfterAttempt::Superseded`],
//! counted in [`RunSummary::superseded`]). Aborting a running [`run`] future is as safe as a kill.
//!
//! Isolation: NATS is connected inside the NATS attempts, so a NATS server that does not answer
//! never holds back a webhook; a failed webhook response's body is read up to
//! [`ERROR_BODY_LIMIT`] bytes only. Each send runs as a task of its own and the loop keeps
//! scheduling while sends are in flight: a receiver that holds its request for the whole
//! [`ATTEMPT_TIMEOUT`] never delays another delivery's retry or a new emission. At most
//! `Targets::max_in_flight` sends are in flight at once (32 unless configured:
//! `notifications.maxInFlight`); the other due deliveries stay due in the store and start as sends
//! finish.
//!
//! Damaged rows: every delivery row is decoded on its own ([`store::due_decoded`]); one that
//! cannot be (a value of the wrong type or out of its range) is skipped, reported once
//! ([`RunEvent::Damaged`], a `tracing` warning) and counted ([`RunSummary::damaged`]), and the
//! other deliveries go on (`report_damaged` says why it is remembered, not marked).
//!
//! HTTPS: each webhook has a client of its own (rustls with the ring provider) trusting exactly the
//! roots its settings loaded (its `caFile`, or the system roots). A certificate the roots do not
//! accept is a failed attempt whose reason says so (retried, then dead-lettered), never a panic.

use super::event::{dlq_message, dlq_msg_id, DLQ_SUBJECT, EVENT_TYPE};
use super::settings::{Targets, WebhookTarget};
use super::signature::webhook_headers;
use super::store::{self, AfterAttempt, AttemptResult, DeliveryRow, TargetKey};
use crate::core::metrics::{self, Event, NOTIFY_DELIVERY_DURATION};
use crate::core::store::any::AnyStore;
use crate::core::store::busy::BusyCutoff;
use crate::core::store::StoreError;
use crate::core::time::rfc3339_millis;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one webhook POST or NATS publish may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// When the runner stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// Deliver what is due now, then return.
    Once,
    /// Keep delivering, waiting for retries, until nothing is pending for these targets.
    UntilIdle,
    /// Never return: deliver, then look for new emissions every `poll` (the service).
    Forever { poll: Duration },
}

/// Something the runner did, for displays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEvent {
    Attempt {
        delivery_id: i64,
        export_id: String,
        target: TargetKey,
        attempt: u32,
        sent_at: String,
        status: Option<u16>,
        reason: Option<String>,
        after: AfterAttempt,
    },
    DeadLetterPublished {
        delivery_id: i64,
    },
    DeadLetterNotPublished {
        delivery_id: i64,
        reason: String,
    },
    Waiting {
        until_ms: u64,
        pending: usize,
    },
    /// A delivery row that cannot be decoded: skipped (the others go on), said once per runner.
    Damaged(store::DamagedDelivery),
}

/// One line per event, for the CLI and the service log; untrusted text (targets, export ids,
/// reasons) is made visible.
impl std::fmt::Display for RunEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::core::text::{hide_url_passwords, visible};
        match self {
            RunEvent::Attempt {
                delivery_id,
                export_id,
                target,
                attempt,
                sent_at,
                status,
                reason,
                after,
            } => {
                let reason = reason.as_deref().map(hide_url_passwords);
                let result = match (status, reason) {
                    (Some(s), Some(r)) => format!("{s} {}", visible(&r)),
                    (Some(s), None) => s.to_string(),
                    (None, Some(r)) => visible(&r).into_owned(),
                    (None, None) => "ok".into(),
                };
                let next = match after {
                    AfterAttempt::Delivered => "delivered".to_string(),
                    AfterAttempt::RetryAt(t) => format!("retry at {}", rfc3339_millis(*t)),
                    AfterAttempt::Dead => "dead-lettered".to_string(),
                    AfterAttempt::Superseded => "not recorded: this runner's claim expired and another runner took the delivery over; its outcome stands".to_string(),
                };
                write!(
                    f,
                    "delivery {delivery_id} {} {} export {} attempt {attempt} at {}: {result} -> {next}",
                    visible(&target.kind),
                    visible(&hide_url_passwords(&target.target)),
                    visible(export_id),
                    visible(sent_at)
                )
            }
            RunEvent::DeadLetterPublished { delivery_id } => write!(
                f,
                "delivery {delivery_id}: dead letter published on {DLQ_SUBJECT}"
            ),
            RunEvent::DeadLetterNotPublished {
                delivery_id,
                reason,
            } => write!(
                f,
                "delivery {delivery_id}: dead letter not published yet ({}); the next run tries again",
                visible(&hide_url_passwords(reason))
            ),
            RunEvent::Waiting { until_ms, pending } => write!(
                f,
                "waiting until {} ({pending} pending)",
                rfc3339_millis(*until_ms)
            ),
            RunEvent::Damaged(d) => write!(
                f,
                "delivery {}: skipped, its row cannot be read: {}; the other deliveries go on. Repair the value (or restore the store from a backup): the row is delivered once it reads again",
                d.delivery_id.map_or("?".to_string(), |id| id.to_string()),
                visible(&d.to_string())
            ),
        }
    }
}

/// What a run did in all.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub enrolled: usize,
    pub attempts: usize,
    pub delivered: usize,
    pub dead: usize,
    pub dead_letters_published: usize,
    /// Attempts not recorded because this runner's claim had expired and another runner had taken
    /// the delivery over (its outcome stands).
    pub superseded: usize,
    /// Pending deliveries to these targets left when the run ended.
    pub pending: usize,
    /// Pending deliveries to targets not configured in this run (left alone).
    pub pending_elsewhere: usize,
    /// Delivery rows that cannot be decoded (a damaged store, a row altered by hand), skipped
    /// and reported ([`RunEvent::Damaged`]); not counted in `pending`.
    pub damaged: usize,
}

/// Why the runner stopped early.
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    #[error("no notification targets configured: give --webhook URL --webhook-secret-file FILE and/or --nats URL (or notifications.* in the configuration)")]
    NoTargets,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    #[error("a store call of the delivery runner failed: {0}")]
    Task(String),
}

/// The store as the runner uses it: every call runs on the blocking pool, never on the async
/// thread that sends (the PostgreSQL client blocks, and must not run inside the runtime).
#[derive(Clone)]
pub struct RunnerStore {
    store: Arc<Mutex<AnyStore>>,
    /// Ends the store's lock waits early once set (serve stopping: `core::store::busy`).
    cutoff: Option<Arc<BusyCutoff>>,
}

impl RunnerStore {
    pub fn new(store: AnyStore) -> RunnerStore {
        RunnerStore {
            store: Arc::new(Mutex::new(store)),
            cutoff: None,
        }
    }

    /// Every call's store work runs under `cutoff` ([`crate::core::store::busy::with_cutoff`]).
    pub fn under_cutoff(mut self, cutoff: Arc<BusyCutoff>) -> RunnerStore {
        self.cutoff = Some(cutoff);
        self
    }

    /// Runs `f` with the store on the blocking pool.
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&AnyStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, DeliverError> {
        let (store, cutoff) = (self.store.clone(), self.cutoff.clone());
        let out = tokio::task::spawn_blocking(move || {
            let guard = store.lock().unwrap_or_else(|e| e.into_inner());
            match &cutoff {
                Some(c) => crate::core::store::busy::with_cutoff(c, || f(&guard)),
                None => f(&guard),
            }
        })
        .await
        .map_err(|e| DeliverError::Task(e.to_string()))?;
        Ok(out?)
    }
}

/// The transports of one run: an HTTP client per webhook, the NATS connection (made lazily, kept
/// for the run), the run's clock, and when this process may try again to publish a dead letter
/// that could not be published.
struct Transports {
    /// One HTTP client per webhook URL (each with its own trust anchors).
    http: Arc<HashMap<String, reqwest::Client>>,
    nats: NatsLink,
    clock: Arc<dyn DeliveryClock>,
    /// Delivery id -> Unix ms before which its unpublished dead letter is not tried again.
    dlq_retry_at: HashMap<i64, u64>,
}

/// The NATS server of a run: connected on first use, and anew once the connection is lost or a
/// publish on it failed or ran out of time. Cloning it shares the connection (the sends in flight
/// and the loop use the same one).
///
/// A message is never published on a connection that is not up, and a connection is never used
/// again after a publish on it failed: async_nats keeps what is published while it reconnects and
/// sends it once it has, so a publish that ran out of time (recorded failed, perhaps dead-lettered
/// since) was sent later all the same, and the stream then held the event beside its dead letter.
/// Each connection reconnects at most once by itself, at once (what it holds then goes out within
/// the attempt that published it); after that it is given up with what it holds.
#[derive(Clone)]
struct NatsLink {
    url: Option<String>,
    conn: Arc<Mutex<Option<NatsConn>>>,
}

/// One connection to NATS and its JetStream context.
#[derive(Clone)]
struct NatsConn {
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
    /// Set once a publish on it failed or ran out of time: it is not used again.
    spent: Arc<std::sync::atomic::AtomicBool>,
}

impl NatsConn {
    fn is_up(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// Whether the next publish may use it: up, and no publish on it has failed.
    fn usable(&self) -> bool {
        !self.spent.load(std::sync::atomic::Ordering::SeqCst) && self.is_up()
    }

    /// No publish uses it again (the next attempt connects anew).
    fn give_up(&self) {
        self.spent.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// How long connecting to NATS may take: half an attempt, so that the publish and its JetStream
/// ack keep the other half.
const NATS_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an unpublished dead letter waits before this process tries to publish it again (a
/// later run tries at once).
pub const DLQ_RETRY: Duration = Duration::from_secs(60);

/// The most of a failed webhook response's body read for its reason (the reason keeps 200
/// characters): a receiver that answers with gigabytes, or trickles, costs no more than this.
pub const ERROR_BODY_LIMIT: usize = 4096;

/// The time the runner keeps: when attempts are sent and recorded, when retries fall due, and how
/// it waits for them. Every command runs on [`SystemClock`]; `airlock demo` runs its past night's
/// retries on a clock of its own (so its workspace has a dead letter without waiting 31 s).
pub trait DeliveryClock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
    /// Resolves after `d` of this clock's time.
    fn sleep(&self, d: Duration) -> futures_util::future::BoxFuture<'static, ()>;
}

/// The machine's clock.
pub struct SystemClock;

impl DeliveryClock for SystemClock {
    fn now_ms(&self) -> u64 {
        crate::core::hlc::unix_ms_now()
    }

    fn sleep(&self, d: Duration) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// Runs the delivery loop over `store` for `targets`.
pub async fn run(
    store: &RunnerStore,
    targets: &Targets,
    mode: RunMode,
    on_event: &mut (dyn FnMut(&RunEvent) + Send),
) -> Result<RunSummary, DeliverError> {
    run_on(store, targets, mode, Arc::new(SystemClock), on_event).await
}

/// [`run`] on `clock`'s time.
pub async fn run_on(
    store: &RunnerStore,
    targets: &Targets,
    mode: RunMode,
    clock: Arc<dyn DeliveryClock>,
    on_event: &mut (dyn FnMut(&RunEvent) + Send),
) -> Result<RunSummary, DeliverError> {
    let (_keep, mut never) = tokio::sync::watch::channel(false);
    run_loop(store, targets, mode, &mut never, clock, on_event).await
}

/// [`run`] that also returns once `stop` turns true (a service shutting down): a batch already
/// sent finishes and is recorded first (each attempt is bounded by [`ATTEMPT_TIMEOUT`]); what is
/// not sent yet stays pending with its schedule, for the next run.
pub async fn run_until(
    store: &RunnerStore,
    targets: &Targets,
    mode: RunMode,
    stop: &mut tokio::sync::watch::Receiver<bool>,
    on_event: &mut (dyn FnMut(&RunEvent) + Send),
) -> Result<RunSummary, DeliverError> {
    run_loop(store, targets, mode, stop, Arc::new(SystemClock), on_event).await
}

async fn run_loop(
    store: &RunnerStore,
    targets: &Targets,
    mode: RunMode,
    stop: &mut tokio::sync::watch::Receiver<bool>,
    clock: Arc<dyn DeliveryClock>,
    on_event: &mut (dyn FnMut(&RunEvent) + Send),
) -> Result<RunSummary, DeliverError> {
    if targets.is_empty() {
        return Err(DeliverError::NoTargets);
    }
    let keys = targets.keys();
    let mut http = HashMap::new();
    for w in &targets.webhooks {
        http.insert(w.url.clone(), webhook_client(w)?);
    }
    let mut t = Transports {
        http: Arc::new(http),
        nats: NatsLink {
            url: targets.nats.clone(),
            conn: Arc::default(),
        },
        clock: clock.clone(),
        dlq_retry_at: HashMap::new(),
    };
    let shared_targets = Arc::new(targets.clone());
    let mut summary = RunSummary::default();
    // The sends in flight (at most `targets.max_in_flight`): each delivery's attempt is recorded
    // when its receiver answers, and while one waits (up to ATTEMPT_TIMEOUT) the others keep their
    // schedule: a receiver that hangs never holds back another delivery's retry or a new emission.
    let mut st = LoopState::default();
    loop {
        // Once stopping, nothing new is sent; what was sent is finished and recorded.
        let stopping = *stop.borrow();
        if stopping && st.inflight.is_empty() {
            break;
        }
        let started = if stopping {
            false
        } else {
            let run = Run {
                store,
                keys: &keys,
                targets: &shared_targets,
                mode,
            };
            start_round(&run, &mut t, &mut st, &mut summary, on_event).await?
        };
        let full = st.inflight.len() >= targets.max_in_flight;
        // What to wait for: the next send to finish, the next retry (not in Once mode: it
        // delivers what is due now; not while every slot is taken: a slot frees first, each send
        // bounded by ATTEMPT_TIMEOUT), the poll (Forever), or the stop.
        let wait = if stopping || full {
            None
        } else if mode == RunMode::Once {
            if st.inflight.is_empty() && !started {
                break;
            }
            None
        } else {
            match next_wait(store, &keys, mode, &*clock, &st, on_event).await? {
                Wait::For(w) => Some(w),
                Wait::Finished => None,
                Wait::Done => break,
            }
        };
        let sleep = async {
            match wait {
                Some(w) => clock.sleep(w).await,
                None => std::future::pending::<()>().await,
            }
        };
        let finished = async {
            match futures_util::StreamExt::next(&mut st.inflight).await {
                Some(done) => done,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            done = finished => {
                record_sent(store, &t, done?, &mut st, &mut summary, on_event).await?;
            }
            _ = sleep => {}
            _ = stopped(stop), if !stopping => {}
        }
    }
    let wanted: std::collections::HashSet<TargetKey> = keys.into_iter().collect();
    // Counted without the event bodies (a large backlog left pending is not read whole again).
    let pending = store
        .call(|s| store::deliveries_without_bodies(s, Some("pending")))
        .await?;
    // Damaged pending rows were reported (and counted in `damaged`) when first seen.
    report_damaged(pending.damaged, &mut st, &mut summary, on_event);
    for d in pending.rows {
        if wanted.contains(&d.key()) {
            summary.pending += 1;
        } else {
            summary.pending_elsewhere += 1;
        }
    }
    Ok(summary)
}

/// What the loop keeps between rounds.
#[derive(Default)]
struct LoopState {
    inflight: InFlight,
    /// The deliveries of `inflight` (left out of the due rows until their result is recorded).
    sending: std::collections::HashSet<i64>,
    /// The damaged rows already reported by this runner, by (delivery id, column): each is said
    /// once, not at every round.
    reported: std::collections::HashSet<(Option<i64>, String)>,
    /// When the first round looked for due deliveries (`None` before it): `--once` sends what
    /// was due then, and does not send again what it attempted since.
    started_at: Option<u64>,
    /// When the service's runner next looks for damaged rows of any target (see
    /// [`DAMAGE_SCAN_EVERY`]); 0: at its first round.
    damage_scan_at: u64,
}

/// How often a runner that never ends (the service) reads every delivery row, without event
/// bodies, for damage: the rows of targets it does not deliver to, and the delivered and dead
/// ones, are never met by its due reads, and a run of `notify run` reports the pending ones when
/// it ends, which the service never does. Each damaged row is still said once.
pub const DAMAGE_SCAN_EVERY: Duration = Duration::from_secs(60);

/// What every round of one run works with.
struct Run<'a> {
    store: &'a RunnerStore,
    keys: &'a [TargetKey],
    targets: &'a Arc<Targets>,
    mode: RunMode,
}

/// One round: enrol new emissions and publish dead letters (each round, except `--once` after
/// its first), then start the due deliveries, as many as the cap on sends in flight
/// (`Targets::max_in_flight`) leaves room for: the store reads that many due rows (in due order),
/// not every due row ([`store::due_decoded`]).
/// Damaged rows met on the way are reported (once) and skipped; they never take a slot. Returns
/// whether a send started.
async fn start_round(
    run: &Run<'_>,
    t: &mut Transports,
    st: &mut LoopState,
    summary: &mut RunSummary,
    on_event: &mut (dyn FnMut(&RunEvent) + Send),
) -> Result<bool, DeliverError> {
    let (store, once) = (run.store, run.mode == RunMode::Once);
    if !once || st.started_at.is_none() {
        let (k, now) = (run.keys.to_vec(), t.clock.now_ms());
        summary.enrolled += store.call(move |s| store::enroll(s, &k, now)).await?;
        publish_dead_letters(store, t, st, summary, on_event).await?;
    }
    if matches!(run.mode, RunMode::Forever { .. }) && t.clock.now_ms() >= st.damage_scan_at {
        let damaged = store.call(|s| store::damaged_deliveries(s)).await?;
        report_damaged(damaged, st, summary, on_event);
        st.damage_scan_at = t.clock.now_ms() + DAMAGE_SCAN_EVERY.as_millis() as u64;
    }
    let room = run.targets.max_in_flight.saturating_sub(st.inflight.len());
    if room == 0 {
        return Ok(false);
    }
    let now = t.clock.now_ms();
    let started_at = *st.started_at.get_or_insert(now);
    // `--once` sends what is due at its start, once: a retry that falls due while a slow receiver
    // holds the first round waits for the next run; what the cap held back goes out as sends
    // finish.
    let (k, skip) = (run.keys.to_vec(), st.sending.clone());
    let decoded = store
        .call(move |s| {
            let q = store::DueQuery {
                targets: &k,
                now_ms: now,
                due_by_ms: if once { started_at } else { now },
                attempted_since: once.then_some(started_at),
                limit: room,
                skip: &skip,
            };
            store::due_decoded(s, &q)
        })
        .await?;
    report_damaged(decoded.damaged, st, summary, on_event);
    if decoded.rows.is_empty() {
        return Ok(false);
    }
    start_sends(store, run.targets, t, decoded.rows, st).await
}

/// Reports the damaged rows not reported yet: a warning in the log (`tracing`) and a
/// [`RunEvent::Damaged`], once per (delivery id, column) in this runner's life.
///
/// Why the runner remembers them instead of marking them in the store: a mark would be a write to
/// a row that already does not read (on a store that may be damaged further), it would need a
/// column of its own (a migration, on SQLite and PostgreSQL) or reuse one whose meaning it would
/// blur (say `status = 'dead'`, which `notify retry` would then undo), and it would outlive the
/// repair: an operator who fixes the value would have to clear the mark as well. Remembered here,
/// the row is skipped at every round (a round's read of the due rows passes over it and reads on,
/// so it never takes a slot: the readable rows behind it are sent; no hot loop), said once per
/// process (a restarted service says it again, once), and delivered as soon as it reads again.
/// The metrics
/// (`airlock_notify_deliveries{status="damaged"}`) and `notify list` show it from the store, for
/// every process.
fn report_damaged(
    damaged: Vec<store::DamagedDelivery>,
    st: &mut LoopState,
    summary: &mut RunSummary,
    on_event: &mut (dyn FnMut(&RunEvent) + Send),
) {
    for d in damaged {
        if !st.reported.insert((d.delivery_id, d.column.clone())) {
            continue;
        }
        summary.damaged += 1;
        let (id, column) = (d.delivery_id, d.column.clone());
        let event = RunEvent::Damaged(d);
        tracing::warn!(delivery_id = ?id, column = %column, "{event}");
        on_event(&event);
    }
}

/// What the loop waits for when it is not full and not in `--once`.
enum Wait {
    /// The next retry or poll, or a send finishing first.
    For(Duration),
    /// A send finishing (nothing else is pending for these targets).
    Finished,
    /// Nothing in flight and nothing pending: the run is over (not in Forever).
    Done,
}

/// When the next retry falls due (or the poll, in Forever), saying `waiting until ...` when
/// nothing is in flight.
async fn next_wait(
    store: &RunnerStore,
    keys: &[TargetKey],
    mode: RunMode,
    clock: &dyn DeliveryClock,
    st: &LoopState,
    on_event: &mut (dyn FnMut(&RunEvent) + Send),
) -> Result<Wait, DeliverError> {
    let (k, now, skip) = (keys.to_vec(), clock.now_ms(), st.sending.clone());
    let (next, pending) = store
        .call(move |s| {
            let pending = usize::try_from(store::pending_count(s)?).unwrap_or(usize::MAX);
            Ok((store::next_due_except(s, &k, now, &skip)?, pending))
        })
        .await?;
    let wait = match (next, mode) {
        (None, RunMode::Forever { poll }) => poll,
        (Some(at), RunMode::Forever { poll }) => poll.min(until(clock, at)),
        (Some(at), _) => until(clock, at),
        (None, _) if st.inflight.is_empty() => return Ok(Wait::Done),
        (None, _) => return Ok(Wait::Finished),
    };
    // "waiting until" is said when nothing is on its way (as before a retry).
    if st.inflight.is_empty() {
        on_event(&RunEvent::Waiting {
            until_ms: clock.now_ms() + wait.as_millis() as u64,
            pending,
        });
    }
    Ok(Wait::For(wait))
}

/// The client of one webhook: no proxy, no redirects, [`ATTEMPT_TIMEOUT`]; for https, rustls
/// trusting exactly the webhook's roots (no built-in bundle) and refusing any plain-HTTP hop.
fn webhook_client(w: &WebhookTarget) -> Result<reqwest::Client, DeliverError> {
    let mut b = reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none());
    if let Some(tls) = &w.tls {
        b = b
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .https_only(true);
        for c in &tls.certs {
            b = b.add_root_certificate(c.clone());
        }
    }
    b.build().map_err(|e| {
        DeliverError::Client(format!(
            "webhook {}: {}",
            crate::core::text::hide_url_passwords(&w.url),
            crate::core::text::error_chain(&e)
        ))
    })
}

/// Resolves when `stop` changes (never, once its sender is gone).
async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    if stop.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn until(clock: &dyn DeliveryClock, at_ms: u64) -> Duration {
    Duration::from_millis(at_ms.saturating_sub(clock.now_ms()))
}

/// A finished send: the delivery, its claim, the attempt's result and its duration.
type Sent = (DeliveryRow, store::Claim, AttemptResult, f64);
type InFlight = futures_util::stream::FuturesUnordered<SendTask>;

/// A send running as a task of its own, so that it makes progress (and its response is taken
/// within its timeout) while the loop waits on the store or on a dead letter's publish. Dropping it
/// (the run's future dropped) aborts the send: as safe as a kill.
struct SendTask(tokio::task::JoinHandle<Sent>);

impl Drop for SendTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl std::future::Future for SendTask {
    type Output = Result<Sent, DeliverError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0)
            .poll(cx)
            .map_err(|e| DeliverError::Task(e.to_string()))
    }
}

/// Claims the due deliveries (at most `Targets::max_in_flight` in all with those in flight: the
/// caller passes no more) and starts sending every claimed one (NATS connects inside its own
/// sends, once for the lot, so a NATS server that hangs never holds back a webhook). Returns
/// whether anything was started; each result is recorded by [`record_sent`] as soon as it arrives:
/// a kill after one receiver's 2xx does not send that one again.
async fn start_sends(
    store: &RunnerStore,
    targets: &Arc<Targets>,
    t: &Transports,
    due: Vec<DeliveryRow>,
    st: &mut LoopState,
) -> Result<bool, DeliverError> {
    use futures_util::FutureExt;
    let ids: Vec<i64> = due.iter().map(|d| d.delivery_id).collect();
    let now = t.clock.now_ms();
    let claims = store.call(move |s| store::claim(s, &ids, now)).await?;
    let mut claims: HashMap<i64, store::Claim> =
        claims.into_iter().map(|c| (c.delivery_id, c)).collect();
    let nats = t.nats.clone().connect_owned().shared();
    let mut started = false;
    for d in due {
        let Some(c) = claims.remove(&d.delivery_id) else {
            continue;
        };
        let (http, clock, targets, nats) = (
            t.http.clone(),
            t.clock.clone(),
            targets.clone(),
            nats.clone(),
        );
        st.sending.insert(d.delivery_id);
        started = true;
        st.inflight.push(SendTask(tokio::spawn(async move {
            let started = std::time::Instant::now();
            let result = send(&http, &*clock, &targets, nats, &d).await;
            (d, c, result, started.elapsed().as_secs_f64())
        })));
    }
    Ok(started)
}

/// Records one finished send (only under its claim: see [`store::record_attempt`]) with its
/// duration, and tells `on_event`.
async fn record_sent(
    store: &RunnerStore,
    t: &Transports,
    (d, c, result, seconds): Sent,
    st: &mut LoopState,
    summary: &mut RunSummary,
    on_event: &mut (dyn FnMut(&RunEvent) + Send),
) -> Result<(), DeliverError> {
    st.sending.remove(&d.delivery_id);
    let (recorded, now) = (result.clone(), t.clock.now_ms());
    let after = store
        .call(move |s| {
            let after = store::record_attempt(s, &c, &recorded, now)?;
            metrics::record_quietly(
                s,
                &[Event::Observe {
                    name: NOTIFY_DELIVERY_DURATION,
                    value: seconds,
                }],
            );
            Ok(after)
        })
        .await;
    // A row damaged while its send was in flight: nothing is recorded (its claim stays until
    // the lease ends); it is reported and skipped like any damaged row, the others go on.
    let after = match after {
        Err(DeliverError::Store(e)) => match store::DamagedDelivery::from_error(&e) {
            Some(damage) => {
                report_damaged(vec![damage], st, summary, on_event);
                return Ok(());
            }
            None => return Err(DeliverError::Store(e)),
        },
        after => after?,
    };
    summary.attempts += 1;
    match after {
        AfterAttempt::Delivered => summary.delivered += 1,
        AfterAttempt::Dead => summary.dead += 1,
        AfterAttempt::Superseded => summary.superseded += 1,
        AfterAttempt::RetryAt(_) => {}
    }
    on_event(&RunEvent::Attempt {
        delivery_id: d.delivery_id,
        export_id: d.export_id.clone(),
        target: d.key(),
        attempt: d.attempts + 1,
        sent_at: result.sent_at,
        status: result.status,
        reason: result.reason,
        after,
    });
    Ok(())
}

/// Publishes the unpublished dead letters on the DLQ subject (when NATS is configured), all at
/// once; one that cannot be published is tried again by this process after [`DLQ_RETRY`] (and
/// by the next run at once).
async fn publish_dead_letters(
    store: &RunnerStore,
    t: &mut Transports,
    st: &mut LoopState,
    summary: &mut RunSummary,
    on_event: &mut (dyn FnMut(&RunEvent) + Send),
) -> Result<(), DeliverError> {
    if t.nats.url.is_none() {
        return Ok(());
    }
    let now = t.clock.now_ms();
    let (dead, damaged) = store.call(|s| store::unpublished_dead_decoded(s)).await?;
    // A dead row that does not read has no dead letter to write: reported, skipped.
    report_damaged(damaged, st, summary, on_event);
    let retry_at = &t.dlq_retry_at;
    let dead: Vec<store::DeadLetter> = dead
        .into_iter()
        .filter(|d| {
            retry_at
                .get(&d.delivery.delivery_id)
                .is_none_or(|at| *at <= now)
        })
        .collect();
    if dead.is_empty() {
        return Ok(());
    }
    let js = t.nats.connect().await;
    let publishes = dead.iter().map(|dl| {
        let d = &dl.delivery;
        let msg = dlq_message(
            &d.body,
            d.last_reason.as_deref().unwrap_or("failed"),
            d.last_status,
            d.attempts,
        );
        let msg_id = dlq_msg_id(&d.export_id, d.delivery_id, dl.failed_attempts);
        let conn = std::future::ready(js.clone());
        async move { publish_within(conn, DLQ_SUBJECT, &msg_id, msg).await }
    });
    let results = futures_util::future::join_all(publishes).await;
    for (dl, result) in dead.iter().zip(results) {
        let id = dl.delivery.delivery_id;
        match result {
            Ok(_) => {
                store
                    .call(move |s| store::mark_dlq_published(s, id))
                    .await?;
                t.dlq_retry_at.remove(&id);
                summary.dead_letters_published += 1;
                on_event(&RunEvent::DeadLetterPublished { delivery_id: id });
            }
            Err(reason) => {
                let again = now.saturating_add(DLQ_RETRY.as_millis() as u64);
                t.dlq_retry_at.insert(id, again);
                on_event(&RunEvent::DeadLetterNotPublished {
                    delivery_id: id,
                    reason,
                });
            }
        }
    }
    Ok(())
}

/// Publishes (see [`publish`]) on the connection `conn` resolves to, connecting included, within
/// [`ATTEMPT_TIMEOUT`]. A connection that is not up is not published on; one whose publish failed
/// or ran out of time is given up, so that nothing it still holds goes out later.
async fn publish_within(
    conn: impl std::future::Future<Output = Result<NatsConn, String>>,
    subject: &str,
    msg_id: &str,
    body: String,
) -> Result<bool, String> {
    let mut used: Option<NatsConn> = None;
    let attempt = async {
        let c = conn.await?;
        used = Some(c.clone());
        if !c.is_up() {
            return Err(format!(
                "NATS publish on {subject}: not published: the connection to NATS was lost (the next attempt connects anew)"
            ));
        }
        publish(&c.js, subject, msg_id, body).await
    };
    let sent = tokio::time::timeout(ATTEMPT_TIMEOUT, attempt)
        .await
        .unwrap_or_else(|_| Err(no_ack_in_time(subject)));
    if let (Err(_), Some(c)) = (&sent, &used) {
        c.give_up();
    }
    sent
}

impl NatsLink {
    /// The connection, connecting first when there is none that may be used (a failure is the
    /// reason of every NATS attempt that waited for it).
    async fn connect(&self) -> Result<NatsConn, String> {
        let Some(url) = &self.url else {
            return Err("NATS is not configured".into());
        };
        {
            let mut held = self.conn.lock().unwrap_or_else(|e| e.into_inner());
            match held.as_ref() {
                Some(c) if c.usable() => return Ok(c.clone()),
                // Lost, or a publish on it failed: never used again.
                Some(c) => {
                    c.give_up();
                    *held = None;
                }
                None => {}
            }
        }
        let opts = async_nats::ConnectOptions::new()
            .connection_timeout(NATS_CONNECT_TIMEOUT)
            .max_reconnects(1)
            .name("airlock-notify");
        match tokio::time::timeout(NATS_CONNECT_TIMEOUT, opts.connect(url.as_str())).await {
            Ok(Ok(client)) => {
                let mut js = async_nats::jetstream::new(client.clone());
                js.set_timeout(ATTEMPT_TIMEOUT);
                let conn = NatsConn {
                    client,
                    js,
                    spent: Arc::default(),
                };
                *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = Some(conn.clone());
                Ok(conn)
            }
            Ok(Err(e)) => Err(format!("cannot connect to NATS: {e}")),
            Err(_) => Err(format!(
                "cannot connect to NATS: no answer within {} s",
                NATS_CONNECT_TIMEOUT.as_secs()
            )),
        }
    }

    /// [`NatsLink::connect`] as a future that owns what it needs (shared by the sends it starts).
    fn connect_owned(self) -> futures_util::future::BoxFuture<'static, Result<NatsConn, String>> {
        Box::pin(async move { self.connect().await })
    }
}

/// Sends one delivery; never fails (a failure is an attempt result). `nats` resolves to the
/// run's NATS connection (awaited by NATS deliveries only). A NATS attempt, connection included,
/// takes at most [`ATTEMPT_TIMEOUT`]; a webhook's client has the same bound.
async fn send(
    http: &HashMap<String, reqwest::Client>,
    clock: &dyn DeliveryClock,
    targets: &Targets,
    nats: impl std::future::Future<Output = Result<NatsConn, String>>,
    d: &DeliveryRow,
) -> AttemptResult {
    let sent_at_ms = clock.now_ms();
    let sent_at = rfc3339_millis(sent_at_ms);
    let outcome = match d.target_kind.as_str() {
        "webhook" => match (targets.webhook(&d.target), http.get(&d.target)) {
            (Some(w), Some(client)) => post(client, w, &sent_at, &d.body).await,
            _ => Err((None, "webhook not configured in this run".into())),
        },
        _ => publish_within(nats, EVENT_TYPE, &d.export_id, d.body.clone())
            .await
            .map(|duplicate| {
                let note = duplicate.then(|| {
                    "JetStream: duplicate of an earlier publish (de-duplicated)".to_string()
                });
                (None, note)
            })
            .map_err(|reason| (None, reason)),
    };
    let (delivered, status, reason) = match outcome {
        Ok((status, note)) => (true, status, note),
        Err((status, reason)) => (false, status, Some(reason)),
    };
    AttemptResult {
        sent_at,
        sent_at_ms,
        delivered,
        status,
        reason,
    }
}

fn no_ack_in_time(subject: &str) -> String {
    format!(
        "NATS publish on {subject}: no JetStream ack within {} s",
        ATTEMPT_TIMEOUT.as_secs()
    )
}

/// POSTs a signed body; Ok((status, None)) on 2xx. Of a failed response's body at most
/// [`ERROR_BODY_LIMIT`] bytes are read (the rest is never waited for), its first 200 characters
/// go into the reason.
async fn post(
    client: &reqwest::Client,
    w: &WebhookTarget,
    sent_at: &str,
    body: &str,
) -> Result<(Option<u16>, Option<String>), (Option<u16>, String)> {
    let mut req = client.post(&w.url).body(body.to_string());
    for (name, value) in webhook_headers(&w.secret, sent_at, body) {
        req = req.header(name, value);
    }
    let mut resp = req.send().await.map_err(|e| (None, send_failure(w, &e)))?;
    let status = resp.status();
    if status.is_success() {
        return Ok((Some(status.as_u16()), None));
    }
    // A body that broke off or ran out of time keeps what came.
    let (bytes, _) = crate::core::outbox::replay::read_capped(&mut resp, ERROR_BODY_LIMIT).await;
    // Bytes that are not UTF-8 are kept as `\xNN`, not replaced.
    let snippet: String = crate::core::text::bytes_as_text(&bytes)
        .chars()
        .take(200)
        .collect();
    Err((
        Some(status.as_u16()),
        format!(
            "HTTP {status}{}",
            if snippet.is_empty() {
                String::new()
            } else {
                format!(": {snippet}")
            }
        ),
    ))
}

/// Publishes `body` on `subject` with `Nats-Msg-Id` and waits for the JetStream ack (a stream must
/// capture the subject: without one the publish fails and is retried). Ok(duplicate).
async fn publish(
    js: &async_nats::jetstream::Context,
    subject: &str,
    msg_id: &str,
    body: String,
) -> Result<bool, String> {
    // The id comes from the store (the export_id): a line break in it would end the header and
    // start another one of the stored text's choosing (async_nats does not check header values).
    if msg_id.chars().any(char::is_control) {
        return Err(format!(
            "NATS publish on {subject}: not published: its Nats-Msg-Id {:?} (from the stored export_id) holds a control character that would break out of the header; the store's notify_emissions row was altered: restore the store from a backup",
            msg_id
        ));
    }
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", msg_id);
    headers.insert("X-Stella-Event-Type", EVENT_TYPE);
    let ack = js
        .publish_with_headers(subject.to_string(), headers, body.into())
        .await
        .map_err(|e| format!("NATS publish on {subject}: {e}"))?;
    match ack.await {
        Ok(a) => Ok(a.duplicate),
        Err(e) => Err(format!("NATS publish on {subject}: no JetStream ack: {e}")),
    }
}

/// The reason of a request that got no response; a TLS certificate the webhook's roots refuse
/// says so first, with the roots it was checked against.
fn send_failure(w: &WebhookTarget, e: &reqwest::Error) -> String {
    // The client's error names the URL: its password is not kept in the reason.
    let chain =
        crate::core::text::hide_url_passwords(&crate::core::text::error_chain(e)).into_owned();
    match &w.tls {
        Some(tls) if chain.to_ascii_lowercase().contains("certificate") => format!(
            "TLS certificate rejected (verified against {}): {chain}",
            tls.source
        ),
        _ => chain,
    }
}

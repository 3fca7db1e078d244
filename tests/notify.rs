//! Export-ready notifications end to end (SPEC section 10) through the real binary, with real
//! components: `nats-server -js` on a free loopback port with a temp store directory and a stream over
//! both subjects, and webhook receivers that are axum servers on loopback failing on command.
//!
//! HTTPS receivers are the same axum app served over tokio-rustls with a CA and server certificate
//! generated in the test (rcgen).
//!
//! The retry schedule is pinned (1, 2, 4, 8, 16 s): the dead-letter tests take ~31 s (the SIGKILL
//! test's second run takes the dead runner's claim over at once); the tests run in parallel threads
//! so the binary stays around a minute.

mod common;
mod notify_support;

use airlock::core::notify::archive::tgz_bytes;
use airlock::core::notify::event::{DLQ_SUBJECT, EVENT_TYPE};
use airlock::core::notify::signature::signature_matches;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use common::{announced_url, assert_exit, text};
use notify_support::{Env, Nats, SECRET};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

impl Env {
    /// Writes `yaml` as the configuration file `airlock.yaml` and returns its path.
    fn config(&self, yaml: &str) -> PathBuf {
        let cfg = self.path("airlock.yaml");
        std::fs::write(&cfg, yaml).unwrap();
        cfg
    }
    /// Two jobs for tenant acme, exported portably into `out/`; returns the export's JSON.
    fn export(&self) -> serde_json::Value {
        self.enqueue_two();
        self.export_again()
    }
    fn enqueue_two(&self) {
        for p in ["{\"a\":1}", "{\"a\":2}"] {
            ok(&self.run(&["jobs", "enqueue", "-t", "acme", p]));
        }
    }
    fn export_again(&self) -> serde_json::Value {
        self.export_with(&[])
    }
    /// `jobs export --tenant acme --portable -o out --json` with `extra` flags; its JSON.
    fn export_with(&self, extra: &[&str]) -> serde_json::Value {
        let out = self.path("out");
        let mut args = vec!["jobs", "export", "--tenant", "acme", "--portable", "-o"];
        args.push(out.to_str().unwrap());
        args.extend_from_slice(extra);
        args.push("--json");
        let o = self.run(&args);
        ok(&o);
        serde_json::from_slice(&o.stdout).unwrap()
    }
    fn artifact(&self) -> PathBuf {
        self.path("out/export-portable-bundle-v1.tgz")
    }
    fn deliveries(&self, status: &str) -> Vec<serde_json::Value> {
        let o = self.run(&["notify", "list", "--status", status, "--json"]);
        ok(&o);
        serde_json::from_slice::<Vec<serde_json::Value>>(&o.stdout).unwrap()
    }
}

fn ok(o: &Output) {
    assert_eq!(o.status.code(), Some(0), "{}", text(o));
}

// ---------------------------------------------------------------- webhook receiver

#[derive(Debug, Clone)]
struct Got {
    at: Instant,
    sent_at: String,
    signature: String,
    event_type: String,
    content_type: String,
    body: String,
}

#[derive(Default)]
struct Behaviour {
    fail_first: usize,
    always_fail: bool,
    hang_first: bool,
    /// Answer the first request only after this long (a delivery in flight).
    slow_first: Option<Duration>,
    got: Vec<Got>,
}

type Shared = Arc<Mutex<Behaviour>>;

async fn hook(State(s): State<Shared>, headers: HeaderMap, body: String) -> StatusCode {
    let h = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let (fail, hang, slow) = {
        let mut b = s.lock().unwrap();
        b.got.push(Got {
            at: Instant::now(),
            sent_at: h("x-stella-sent-at"),
            signature: h("x-stella-signature"),
            event_type: h("x-stella-event-type"),
            content_type: h("content-type"),
            body,
        });
        let i = b.got.len() - 1;
        (
            b.always_fail || i < b.fail_first,
            b.hang_first && i == 0,
            b.slow_first.filter(|_| i == 0),
        )
    };
    if let Some(d) = slow {
        tokio::time::sleep(d).await;
    }
    if hang {
        tokio::time::sleep(Duration::from_secs(120)).await;
    }
    if fail {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::NO_CONTENT
    }
}

/// Starts a receiver on loopback; returns its URL and shared state.
async fn receiver(b: Behaviour) -> (String, Shared) {
    let shared: Shared = Arc::new(Mutex::new(b));
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(hook))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, shared)
}

fn got(s: &Shared) -> Vec<Got> {
    s.lock().unwrap().got.clone()
}

// ---------------------------------------------------------------- https receiver

/// A private CA, a server certificate it signed for 127.0.0.1, and an unrelated CA.
struct Pki {
    ca_pem: String,
    other_ca_pem: String,
    server_cert: Vec<u8>,
    server_key: Vec<u8>,
}

fn ca(name: &str) -> (rcgen::Certificate, rcgen::KeyPair) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    (params.self_signed(&key).unwrap(), key)
}

fn pki() -> Pki {
    let (ca_cert, ca_key) = ca("airlock test CA");
    let (other, _) = ca("some other CA");
    let server_key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let server = params.signed_by(&server_key, &ca_cert, &ca_key).unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        other_ca_pem: other.pem(),
        server_cert: server.der().to_vec(),
        server_key: server_key.serialize_der(),
    }
}

/// Starts [`hook`] over TLS on loopback; returns its https URL, its state and the number of TLS
/// handshakes that failed (a client that refused the certificate).
async fn tls_receiver(
    b: Behaviour,
    pki: &Pki,
) -> (String, Shared, Arc<std::sync::atomic::AtomicUsize>) {
    use tokio_rustls::rustls;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(
                pki.server_cert.clone(),
            )],
            rustls::pki_types::PrivatePkcs8KeyDer::from(pki.server_key.clone()).into(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let shared: Shared = Arc::new(Mutex::new(b));
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(hook))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/hook", listener.local_addr().unwrap());
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = refused.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, app, count) = (acceptor.clone(), app.clone(), count.clone());
            tokio::spawn(async move {
                match acceptor.accept(tcp).await {
                    Ok(tls) => {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(
                                hyper_util::rt::TokioIo::new(tls),
                                hyper_util::service::TowerToHyperService::new(app),
                            )
                            .await;
                    }
                    Err(_) => {
                        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            });
        }
    });
    (url, shared, refused)
}

// ---------------------------------------------------------------- nats-server

/// Every message in the stream: (subject, Nats-Msg-Id, X-Stella-Event-Type, payload).
async fn messages(
    stream: &mut async_nats::jetstream::stream::Stream,
) -> Vec<(String, String, String, String)> {
    let last = stream.info().await.unwrap().state.last_sequence;
    let mut out = Vec::new();
    for seq in 1..=last {
        let m = stream.get_raw_message(seq).await.unwrap();
        // Header names compared case-insensitively, as NATS does.
        let h = |n: &str| {
            m.headers
                .iter()
                .find(|(k, _)| k.to_string().eq_ignore_ascii_case(n))
                .and_then(|(_, v)| v.first().map(|v| v.as_str().to_string()))
                .unwrap_or_else(|| format!("(missing; headers {:?})", m.headers))
        };
        out.push((
            m.subject.to_string(),
            h("Nats-Msg-Id"),
            h("X-Stella-Event-Type"),
            String::from_utf8(m.payload.to_vec()).unwrap(),
        ));
    }
    out
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// `airlock notify run` to the webhook at `url` (and NATS when given), off the async runtime.
async fn notify_run(env: &Arc<Env>, url: &str, nats: Option<&str>) -> Output {
    let (e, u, n) = (env.clone(), url.to_string(), nats.map(str::to_string));
    blocking(move || {
        let secret = e.path("secret");
        e.run(&run_args(&u, secret.to_str().unwrap(), n.as_deref()))
    })
    .await
}

fn run_args<'a>(url: &'a str, secret: &'a str, nats: Option<&'a str>) -> Vec<&'a str> {
    let mut a = vec![
        "notify",
        "run",
        "--webhook",
        url,
        "--webhook-secret-file",
        secret,
    ];
    if let Some(n) = nats {
        a.extend(["--nats", n]);
    }
    a
}

// ---------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fails_twice_then_accepts_and_nats_receives_once() {
    let env = Arc::new(Env::new());
    let nats = Nats::start();
    let mut stream = nats.stream(&[EVENT_TYPE, DLQ_SUBJECT]).await;
    let (url, state) = receiver(Behaviour {
        fail_first: 2,
        ..Default::default()
    })
    .await;
    let export = env.export();
    assert_eq!(export["emission"]["outcome"], "emitted");
    let export_id = export["exportId"].as_str().unwrap().to_string();
    let body = export["event"].as_str().unwrap().to_string();
    let o = notify_run(&env, &url, Some(&nats.url)).await;
    ok(&o);
    let g = got(&state);
    assert_eq!(g.len(), 3, "{}", text(&o));
    for r in &g {
        assert_eq!(r.body, body);
        assert_eq!(r.event_type, EVENT_TYPE);
        assert_eq!(r.content_type, "application/json");
        assert!(
            signature_matches(SECRET.as_bytes(), &r.sent_at, &r.body, &r.signature),
            "each attempt is signed for its own sent-at: {r:?}"
        );
    }
    assert!(g[0].sent_at < g[1].sent_at && g[1].sent_at < g[2].sent_at);
    let gaps: Vec<Duration> = g.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(gaps[0] >= Duration::from_millis(1000), "{gaps:?}");
    assert!(gaps[1] >= Duration::from_millis(2000), "{gaps:?}");
    assert!(gaps[1] > gaps[0], "{gaps:?}");
    // NATS: one message, de-duplicable on export_id.
    let msgs = messages(&mut stream).await;
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0].0, EVENT_TYPE);
    assert_eq!(msgs[0].1, export_id);
    assert_eq!(msgs[0].2, EVENT_TYPE);
    assert_eq!(msgs[0].3, body);
    let delivered = env.deliveries("delivered");
    assert_eq!(delivered.len(), 2);
    let hook_row = delivered
        .iter()
        .find(|d| d["targetKind"] == "webhook")
        .unwrap();
    assert_eq!(hook_row["attempts"], 3);
    // Re-exporting the same artifact emits nothing, and nothing more is sent.
    let again = blocking({
        let e = env.clone();
        move || e.export_again()
    })
    .await;
    assert_eq!(again["emission"]["outcome"], "alreadyEmitted");
    assert_eq!(again["exportId"], export_id);
    let o = notify_run(&env, &url, Some(&nats.url)).await;
    ok(&o);
    assert!(text(&o).contains("0 attempt(s)"), "{}", text(&o));
    assert_eq!(got(&state).len(), 3);
    assert_eq!(messages(&mut stream).await.len(), 1);
    // The receiver's offline check of the event against the artifact.
    let check = |event: &str| {
        std::fs::write(env.path("event.json"), event).unwrap();
        env.run(&[
            "notify",
            "check",
            env.path("event.json").to_str().unwrap(),
            "--artifact",
            env.artifact().to_str().unwrap(),
        ])
    };
    ok(&check(&body));
    let forged = body.replace(&export["rootHash"].as_str().unwrap()[7..], &"0".repeat(64));
    assert_exit(&check(&forged), 1, "FAIL  root_hash");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_failing_webhook_is_dead_lettered_after_six_attempts() {
    let env = Arc::new(Env::new());
    let nats = Nats::start();
    let mut stream = nats.stream(&[EVENT_TYPE, DLQ_SUBJECT]).await;
    let (url, state) = receiver(Behaviour {
        always_fail: true,
        ..Default::default()
    })
    .await;
    let export = env.export();
    let body = export["event"].as_str().unwrap().to_string();
    let o = notify_run(&env, &url, Some(&nats.url)).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let g = got(&state);
    assert_eq!(g.len(), 6, "{}", text(&o));
    let gaps: Vec<u128> = g
        .windows(2)
        .map(|w| (w[1].at - w[0].at).as_millis())
        .collect();
    for (gap, want) in gaps.iter().zip([1000, 2000, 4000, 8000, 16000]) {
        assert!(*gap >= want, "{gaps:?}");
    }
    let dead = env.deliveries("dead");
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["attempts"], 6);
    assert_eq!(dead[0]["lastStatus"], 503);
    assert!(dead[0]["lastReason"].as_str().unwrap().contains("503"));
    // The DLQ subject got the dead letter as SPEC 10's JSON.
    let msgs = messages(&mut stream).await;
    let dlq: Vec<_> = msgs.iter().filter(|m| m.0 == DLQ_SUBJECT).collect();
    assert_eq!(dlq.len(), 1, "{msgs:?}");
    let v: serde_json::Value = serde_json::from_str(&dlq[0].3).unwrap();
    assert_eq!(
        v["event"],
        serde_json::from_str::<serde_json::Value>(&body).unwrap()
    );
    assert_eq!(v["lastStatus"], 503);
    assert_eq!(v["attempts"], 6);
    assert!(v["reason"].as_str().unwrap().contains("503"));
    // The DLQ for review, and retry puts it back in the queue.
    let out = env.path("dlq.json");
    ok(&env.run(&["notify", "export", "--output", out.to_str().unwrap()]));
    let review: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(review["deadLetters"][0]["lastStatus"], 503);
    let id = dead[0]["deliveryId"].as_i64().unwrap().to_string();
    ok(&env.run(&["notify", "retry", &id]));
    assert_eq!(env.deliveries("pending").len(), 1);
    let o = env.run(&["notify", "retry", &id]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// A run killed while the receiver holds its request leaves the delivery pending with its claim,
/// which names the killed process; the next run on the same host sees that process is gone and,
/// without waiting out the 30 s lease, records the interrupted attempt and sends it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_delivery_then_run_delivers_once_more() {
    let env = Arc::new(Env::new());
    let (url, state) = receiver(Behaviour {
        hang_first: true,
        ..Default::default()
    })
    .await;
    let export = env.export();
    let secret = env.path("secret");
    let mut child = env
        .cmd(&run_args(&url, secret.to_str().unwrap(), None))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got(&state).is_empty() {
        assert!(Instant::now() < deadline, "the first attempt never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pending = env.deliveries("pending");
    assert!(
        pending.len() == 1 && pending[0]["inFlightSince"].is_string(),
        "the claim is recorded before the request is sent: {pending:?}"
    );
    let killed = child.id();
    child.kill().unwrap(); // SIGKILL while the receiver holds the request
    child.wait().unwrap();
    assert_eq!(env.deliveries("pending").len(), 1, "never lost");
    let started = Instant::now();
    let (e, u) = (env.clone(), url.clone());
    let mut second = blocking(move || {
        let secret = e.path("secret");
        e.cmd(&run_args(&u, secret.to_str().unwrap(), None))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    })
    .await;
    // Without the take-over the run would wait out the lease (30 s): stop it well before.
    while second.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(25) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = second.kill();
    let o = blocking(move || second.wait_with_output().unwrap()).await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "the next run waited {took:?} for the dead runner's claim: {}",
        text(&o)
    );
    ok(&o);
    let g = got(&state);
    assert_eq!(g.len(), 2, "sent once more: {}", text(&o));
    assert_eq!(g[0].body, g[1].body);
    assert!(g[1].body.contains(export["exportId"].as_str().unwrap()));
    let delivered = env.deliveries("delivered");
    assert_eq!(delivered.len(), 1);
    assert_eq!(
        delivered[0]["attempts"], 1,
        "the interrupted attempt does not count"
    );
    let id = delivered[0]["deliveryId"].as_i64().unwrap().to_string();
    let o = env.run(&["notify", "show", &id]);
    ok(&o);
    assert!(text(&o).contains("interrupted"), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("(pid {killed} on ")) && text(&o).contains("is gone"),
        "the interrupted attempt names the dead claimer: {}",
        text(&o)
    );
}

/// A time in the JSON output: an RFC 3339 string with milliseconds, like every other airlock time.
fn assert_rfc3339_millis(v: &serde_json::Value, what: &str) {
    let t = v
        .as_str()
        .unwrap_or_else(|| panic!("{what}: {v} is not a string"));
    assert_eq!(t.len(), 24, "{what}: {t}");
    assert!(t.ends_with('Z'), "{what}: {t}");
    assert!(
        airlock::core::time::parse_rfc3339_ms(t).is_some(),
        "{what}: {t}"
    );
}

/// `notify run --json`: stdout is the summary object alone (it parses as one JSON value); the
/// attempt and waiting lines go to stderr. The delivery's times in `notify list/show --json` are
/// RFC 3339 strings, and the export's `emission` member is camelCase.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_json_keeps_stdout_for_the_summary_and_times_are_rfc3339() {
    let env = Arc::new(Env::new());
    let (url, state) = receiver(Behaviour {
        fail_first: 1,
        ..Default::default()
    })
    .await;
    let export = env.export();
    assert_eq!(export["emission"]["outcome"], "emitted");
    assert!(export["emission"]["emissionId"].is_i64(), "{export}");
    let run_json = |once: bool| {
        let e = env.clone();
        let u = url.clone();
        async move {
            blocking(move || {
                let secret = e.path("secret");
                let mut args = run_args(&u, secret.to_str().unwrap(), None);
                if once {
                    args.push("--once");
                }
                args.push("--json");
                e.run(&args)
            })
            .await
        }
    };
    // One attempt that fails: the attempt line is on stderr, the summary alone on stdout.
    let o = run_json(true).await;
    ok(&o);
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {}", text(&o)));
    assert_eq!(summary["attempts"], 1, "{summary}");
    assert_eq!(summary["pending"], 1, "{summary}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("delivery 1 webhook") && err.contains("-> retry at"),
        "{err}"
    );
    let pending = env.deliveries("pending");
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_rfc3339_millis(&pending[0]["nextAttemptAt"], "nextAttemptAt");
    assert_rfc3339_millis(&pending[0]["lastAttemptAt"], "lastAttemptAt");
    assert!(pending[0]["doneAt"].is_null(), "{}", pending[0]);
    // Until idle: it waits for the retry (a "waiting until" line) and delivers, all on stderr.
    let o = run_json(false).await;
    ok(&o);
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {}", text(&o)));
    assert_eq!(summary["delivered"], 1, "{summary}");
    assert_eq!(summary["pending"], 0, "{summary}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("waiting until"), "{err}");
    assert!(err.contains("-> delivered"), "{err}");
    assert_eq!(got(&state).len(), 2);
    let delivered = env.deliveries("delivered");
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_rfc3339_millis(&delivered[0]["doneAt"], "doneAt");
    assert_rfc3339_millis(&delivered[0]["nextAttemptAt"], "nextAttemptAt");
    let id = delivered[0]["deliveryId"].as_i64().unwrap().to_string();
    let o = env.run(&["notify", "show", &id, "--json"]);
    ok(&o);
    let shown: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_rfc3339_millis(&shown["delivery"]["doneAt"], "delivery.doneAt");
    assert_rfc3339_millis(
        &shown["delivery"]["lastAttemptAt"],
        "delivery.lastAttemptAt",
    );
    assert_rfc3339_millis(&shown["attempts"][0]["sentAt"], "attempts[0].sentAt");
    // The same artifact again: alreadyEmitted, its fields camelCase.
    let again = blocking({
        let e = env.clone();
        move || e.export_again()
    })
    .await;
    let emission = &again["emission"];
    assert_eq!(emission["outcome"], "alreadyEmitted", "{emission}");
    assert_eq!(emission["emissionId"], export["emission"]["emissionId"]);
    assert_rfc3339_millis(&emission["firstAt"], "emission.firstAt");
    assert!(
        emission.get("emission_id").is_none() && emission.get("first_at").is_none(),
        "{emission}"
    );
}

/// Rebuilds the portable export with `bundle.json` replaced but the old `checksums.txt` kept.
fn tamper(artifact: &Path) -> Vec<u8> {
    let mut outer = tar::Archive::new(flate2::read::GzDecoder::new(
        std::fs::File::open(artifact).unwrap(),
    ));
    let mut inner_bytes = Vec::new();
    for e in outer.entries().unwrap() {
        let mut e = e.unwrap();
        std::io::Read::read_to_end(&mut e, &mut inner_bytes).unwrap();
    }
    let mut inner = tar::Archive::new(flate2::read::GzDecoder::new(&inner_bytes[..]));
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for e in inner.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().display().to_string();
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut b).unwrap();
        if name == "bundle.json" {
            b = String::from_utf8(b)
                .unwrap()
                .replace("acme", "acmf")
                .into_bytes();
        }
        files.push((name, b));
    }
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let new_inner = tgz_bytes(&refs).unwrap();
    tgz_bytes(&[("portable-bundle-v1.tgz", &new_inner)]).unwrap()
}

/// An outer archive whose single entry climbs out of the extraction directory.
fn escaping_archive() -> Vec<u8> {
    let mut h = tar::Header::new_old();
    h.as_old_mut().name[..12].copy_from_slice(b"../evil.json");
    h.set_size(2);
    h.set_mode(0o644);
    h.set_cksum();
    let mut t = tar::Builder::new(Vec::new());
    t.append(&h, &b"{}"[..]).unwrap();
    let raw = t.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &raw).unwrap();
    gz.finish().unwrap()
}

#[test]
fn portable_export_is_deterministic_and_refuses_tampering() {
    let env = Env::new();
    let first = env.export();
    let bytes = std::fs::read(env.artifact()).unwrap();
    let second = env.export_again();
    assert_eq!(
        std::fs::read(env.artifact()).unwrap(),
        bytes,
        "same logs, same bytes"
    );
    assert_eq!(first["artifactSha256"], second["artifactSha256"]);
    let o = env.run(&["jobs", "verify", env.artifact().to_str().unwrap()]);
    ok(&o);
    assert!(text(&o).contains("match checksums.txt"), "{}", text(&o));
    let o = env.run(&["jobs", "list", "-s", env.path("out").to_str().unwrap()]);
    ok(&o);
    assert!(text(&o).contains("[portable]"), "{}", text(&o));
    // Imports into another store like a plain bundle.
    let mut import = env.cmd(&["jobs", "import", env.artifact().to_str().unwrap()]);
    import.env("AIRLOCK_DB", env.path("other.db"));
    let o = import.output().unwrap();
    ok(&o);
    assert!(text(&o).contains("2 new"), "{}", text(&o));
    // Tampered: refused naming the file that differs, by verify (exit 1) and import (exit 2).
    let forged = env.path("forged.tgz");
    std::fs::write(&forged, tamper(&env.artifact())).unwrap();
    let o = env.run(&["jobs", "verify", forged.to_str().unwrap()]);
    assert_exit(&o, 1, "bundle.json differs from checksums.txt");
    let mut import = env.cmd(&["jobs", "import", forged.to_str().unwrap()]);
    import.env("AIRLOCK_DB", env.path("third.db"));
    let o = import.output().unwrap();
    assert_exit(&o, 2, "bundle.json differs");
    assert!(!env.path("third.db").exists() || !text(&o).contains("IMPORTED"));
    // Path escape: refused before anything is written.
    let evil = env.path("evil.tgz");
    std::fs::write(&evil, escaping_archive()).unwrap();
    let o = env.run(&["jobs", "verify", evil.to_str().unwrap()]);
    assert_exit(&o, 1, "climbs out with ..");
    assert!(!env.dir.path().join("evil.json").exists());
}

#[test]
fn signed_portable_export_verifies_against_the_trust_store_and_check_refuses_a_forgery() {
    let env = Env::new();
    let keys = env.path("keys");
    ok(&env.run(&[
        "keys",
        "generate",
        "--name",
        "exporter",
        "--out",
        keys.to_str().unwrap(),
    ]));
    env.enqueue_two();
    let key = keys.join("exporter.pem");
    let export = env.export_with(&["--key", key.to_str().unwrap()]);
    assert!(export["checksumsTxt"]
        .as_str()
        .unwrap()
        .contains("  bundle.dsse.json\n"));
    assert!(export["checksumsTxt"]
        .as_str()
        .unwrap()
        .contains("  signer.pub.pem\n"));
    let bytes = std::fs::read(env.artifact()).unwrap();
    env.export_with(&["--key", key.to_str().unwrap()]);
    assert_eq!(
        std::fs::read(env.artifact()).unwrap(),
        bytes,
        "signed twice, same bytes"
    );
    // The signature verifies only by a trusted key (signer.pub.pem inside is never trusted).
    let artifact = env.artifact();
    let o = env.run(&[
        "jobs",
        "verify",
        artifact.to_str().unwrap(),
        "--require-signature",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let public = keys.join("exporter.pub.pem");
    let o = env.run(&[
        "jobs",
        "verify",
        artifact.to_str().unwrap(),
        "--require-signature",
        "--trusted-key",
        public.to_str().unwrap(),
        "--json",
    ]);
    ok(&o);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["checks"]["signature"], "pass");
    assert_eq!(report["portable"]["rootHash"], export["rootHash"]);
    // The receiver's check: the event against a forged artifact fails (exit 1).
    std::fs::write(env.path("event.json"), export["event"].as_str().unwrap()).unwrap();
    let forged = env.path("forged.tgz");
    std::fs::write(&forged, tamper(&artifact)).unwrap();
    let o = env.run(&[
        "notify",
        "check",
        env.path("event.json").to_str().unwrap(),
        "--artifact",
        forged.to_str().unwrap(),
    ]);
    assert_exit(&o, 1, "bundle.json differs");
}

/// `notifications.webhooks` in the configuration file is used when no `--webhook` flag is given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_from_the_configuration_file_are_delivered() {
    let env = Arc::new(Env::new());
    let (url, state) = receiver(Behaviour::default()).await;
    env.export();
    let cfg = env.config(&format!(
        "notifications:\n  webhooks:\n    - url: {url}\n      secretFile: {}\n",
        env.path("secret").display()
    ));
    let e = env.clone();
    let o =
        blocking(move || e.run(&["--config", cfg.to_str().unwrap(), "notify", "run", "--once"]))
            .await;
    ok(&o);
    let g = got(&state);
    assert_eq!(g.len(), 1, "{}", text(&o));
    assert!(signature_matches(
        SECRET.as_bytes(),
        &g[0].sent_at,
        &g[0].body,
        &g[0].signature
    ));
    assert_eq!(env.deliveries("delivered").len(), 1);
}

/// An https webhook with its private CA (`--webhook-ca`) gets the body with SPEC 10's headers; one
/// with the system roots (`SSL_CERT_FILE`) too; one whose caFile (configuration file) is another CA
/// fails every attempt on the certificate, is retried on schedule and dead-lettered with that reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_webhooks_verify_the_receiver_against_their_ca() {
    let env = Arc::new(Env::new());
    let pki = pki();
    std::fs::write(env.path("ca.pem"), &pki.ca_pem).unwrap();
    std::fs::write(env.path("other-ca.pem"), &pki.other_ca_pem).unwrap();
    let (good, good_state, good_refused) = tls_receiver(Behaviour::default(), &pki).await;
    let (sys, sys_state, _) = tls_receiver(Behaviour::default(), &pki).await;
    let (wrong, wrong_state, wrong_refused) = tls_receiver(Behaviour::default(), &pki).await;
    let export = env.export();
    let body = export["event"].as_str().unwrap().to_string();
    let secret = env.path("secret").display().to_string();
    let ca = env.path("ca.pem").display().to_string();

    // --webhook-ca: the private CA is the endpoint's only anchor.
    let args = ["notify", "run", "--once", "--webhook", &good];
    let mut args: Vec<&str> = args.to_vec();
    args.extend(["--webhook-secret-file", &secret, "--webhook-ca", &ca]);
    let o = env.run(&args);
    ok(&o);
    let g = got(&good_state);
    assert_eq!(g.len(), 1, "{}", text(&o));
    assert_eq!(good_refused.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(g[0].body, body);
    assert_eq!(g[0].event_type, EVENT_TYPE);
    assert_eq!(g[0].content_type, "application/json");
    assert!(
        signature_matches(
            SECRET.as_bytes(),
            &g[0].sent_at,
            &g[0].body,
            &g[0].signature
        ),
        "{:?}",
        g[0]
    );
    // SPEC 10, computed here: sha256= + hex HMAC-SHA256(secret, sentAt + "." + body).
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{}.{}", g[0].sent_at, body).as_bytes());
    let want = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    assert_eq!(g[0].signature, want);
    let t = g[0].sent_at.as_bytes();
    assert!(
        t.len() == 24 && t[10] == b'T' && t[19] == b'.' && t[23] == b'Z',
        "{}",
        g[0].sent_at
    );
    // A CA count that does not pair with the https webhooks is a usage error.
    let o = env.run(&[
        "notify",
        "run",
        "--once",
        "--webhook",
        &good,
        "--webhook-secret-file",
        &secret,
        "--webhook-ca",
        &ca,
        "--webhook-ca",
        &ca,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--webhook-ca"), "{}", text(&o));

    // No caFile: the system roots. Without our CA among them, a certificate failure (pending for its
    // retry); with it (SSL_CERT_FILE), delivered.
    let sys_run = |cert_file: &str| {
        env.cmd(&[
            "notify",
            "run",
            "--once",
            "--webhook",
            &sys,
            "--webhook-secret-file",
            &secret,
        ])
        .env("SSL_CERT_FILE", env.path(cert_file))
        .env_remove("SSL_CERT_DIR")
        .output()
        .unwrap()
    };
    let o = sys_run("other-ca.pem");
    ok(&o);
    assert!(
        text(&o).contains("TLS certificate rejected (verified against the system roots)"),
        "{}",
        text(&o)
    );
    assert!(got(&sys_state).is_empty());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let o = sys_run("ca.pem");
    ok(&o);
    assert_eq!(got(&sys_state).len(), 1, "{}", text(&o));

    // caFile in the configuration file naming another CA: six refused handshakes, then dead.
    let cfg = env.config(&format!(
        "notifications:\n  webhooks:\n    - url: {good}\n      secretFile: {secret}\n      caFile: {ca}\n    - url: {wrong}\n      secretFile: {secret}\n      caFile: {}\n",
        env.path("other-ca.pem").display()
    ));
    let o = env.run(&["--config", cfg.to_str().unwrap(), "config", "show"]);
    ok(&o);
    assert!(
        text(&o).contains(&format!(
            "{wrong} (secret {secret}, CA {}",
            env.path("other-ca.pem").display()
        )),
        "{}",
        text(&o)
    );
    let (e, c) = (env.clone(), cfg.clone());
    let o = blocking(move || e.run(&["--config", c.to_str().unwrap(), "notify", "run"])).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(
        wrong_refused.load(std::sync::atomic::Ordering::SeqCst),
        6,
        "{}",
        text(&o)
    );
    assert!(got(&wrong_state).is_empty());
    assert_eq!(
        got(&good_state).len(),
        1,
        "already delivered: not sent again"
    );
    let dead = env.deliveries("dead");
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["target"], wrong.as_str());
    assert_eq!(dead[0]["attempts"], 6);
    assert!(dead[0]["lastStatus"].is_null());
    let reason = dead[0]["lastReason"].as_str().unwrap();
    assert!(
        reason.contains("TLS certificate rejected")
            && reason.contains("other-ca.pem")
            && reason.contains("UnknownIssuer"),
        "{reason}"
    );
    let id = dead[0]["deliveryId"].as_i64().unwrap().to_string();
    let o = env.run(&["notify", "show", &id]);
    ok(&o);
    assert!(
        text(&o).matches("TLS certificate rejected").count() >= 6,
        "{}",
        text(&o)
    );
}

// ---------------------------------------------------------------- airlock serve

/// `airlock --config CFG serve` on a free loopback port; returns the child and its URL.
fn start_serve(env: &Env, cfg: &Path) -> (Child, String) {
    let mut child = env
        .cmd(&[
            "--config",
            cfg.to_str().unwrap(),
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = announced_url(&mut child);
    (child, url)
}

/// SIGTERM and the exit status (a graceful shutdown exits 0).
fn terminate(child: &mut Child) -> i32 {
    common::terminate(child, Duration::from_secs(30))
}

async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_delivers_from_the_configuration_and_drains_on_sigterm() {
    let env = Arc::new(Env::new());
    let nats = Nats::start();
    let mut stream = nats.stream(&[EVENT_TYPE, DLQ_SUBJECT]).await;
    let (url, state) = receiver(Behaviour {
        slow_first: Some(Duration::from_millis(1500)),
        ..Default::default()
    })
    .await;
    let export = env.export();
    let cfg = env.config(&format!(
        "notifications:\n  pollInterval: \"00:00:01\"\n  webhooks:\n    - url: {url}\n      secretFile: {}\n  nats:\n    url: {}\n",
        env.path("secret").display(),
        nats.url
    ));
    // First run: SIGTERM while the webhook's answer is still on its way.
    let (mut child, _) = start_serve(&env, &cfg);
    wait_for("the webhook request", || !got(&state).is_empty()).await;
    let code = blocking(move || terminate(&mut child)).await;
    assert_eq!(code, 0);
    let delivered = env.deliveries("delivered");
    assert_eq!(
        delivered.len(),
        2,
        "the in-flight delivery finished: {delivered:?}"
    );
    assert!(env.deliveries("pending").is_empty());
    let g = got(&state);
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].body, export["event"].as_str().unwrap());
    assert!(signature_matches(
        SECRET.as_bytes(),
        &g[0].sent_at,
        &g[0].body,
        &g[0].signature
    ));
    let msgs = messages(&mut stream).await;
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].1, export["exportId"].as_str().unwrap());
    // Second run: a new emission while serve runs is picked up by the poll; /metrics shows it.
    let (mut child, base) = start_serve(&env, &cfg);
    for p in ["{\"a\":3}"] {
        let e = env.clone();
        ok(&blocking(move || e.run(&["jobs", "enqueue", "-t", "acme", p])).await);
    }
    let e = env.clone();
    let second = blocking(move || e.export_again()).await;
    assert_eq!(second["emission"]["outcome"], "emitted");
    wait_for("the second delivery", || got(&state).len() == 2).await;
    let e = env.clone();
    wait_for("both deliveries recorded", move || {
        e.deliveries("delivered").len() == 4
    })
    .await;
    let m = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(metric(&m, "airlock_notify_emissions_total"), 2.0);
    assert_eq!(
        metric(
            &m,
            "airlock_notify_attempts_total{target=\"webhook\",outcome=\"delivered\"}"
        ),
        2.0
    );
    assert_eq!(
        metric(
            &m,
            "airlock_notify_attempts_total{target=\"nats\",outcome=\"delivered\"}"
        ),
        2.0
    );
    assert_eq!(
        metric(
            &m,
            "airlock_notify_deliveries{target=\"webhook\",status=\"pending\"}"
        ),
        0.0
    );
    assert_eq!(
        metric(&m, "airlock_notify_delivery_duration_seconds_count"),
        4.0
    );
    assert!(metric(&m, "airlock_notify_delivery_duration_seconds_sum") >= 1.5);
    assert_eq!(metric(&m, "airlock_notify_dead_letters_total"), 0.0);
    assert_eq!(blocking(move || terminate(&mut child)).await, 0);
    assert_eq!(messages(&mut stream).await.len(), 2);
}

//! Shared helpers for the relay and outbox tests: in-process relays on loopback, a port that
//! refuses connections, envelope builders.
#![allow(dead_code)]

use airlock::core::outbox::{intake, IncomingWrite, NewEnvelope, Outbox, SourceMeta};
use airlock::relay::{self, RelayConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A relay running on a task of the test's runtime.
pub struct TestRelay {
    pub url: String,
    pub outbox: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TestRelay {
    pub async fn start(upstream: &str, outbox: &Path) -> TestRelay {
        Self::start_with(RelayConfig::new(upstream, outbox)).await
    }

    pub async fn start_with(config: RelayConfig) -> TestRelay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let outbox = config.outbox_path.clone();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            relay::serve(listener, config, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        TestRelay {
            url,
            outbox,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// [`TestRelay::stop`], then its outbox opened for reading what it stored.
    pub async fn stop_and_open(self) -> Outbox {
        let path = self.outbox.clone();
        self.stop().await;
        Outbox::open_existing(&path).unwrap()
    }

    /// Graceful stop: waits for the server and the outbox writer.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(20), t)
                .await
                .expect("relay stops within 20 s")
                .unwrap();
        }
    }
}

/// A URL whose port refuses connections (held by a socket that never listens).
pub fn dead_upstream() -> String {
    // One port held for the whole test binary by a socket bound but never listening: a connection
    // to it is refused, and no other process can take the port meanwhile (a listener bound and
    // dropped left a free port that anything could take before the test connected).
    static DEAD: std::sync::OnceLock<(tokio::net::TcpSocket, String)> = std::sync::OnceLock::new();
    let (_, url) = DEAD.get_or_init(|| {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let url = format!("http://{}", socket.local_addr().unwrap());
        (socket, url)
    });
    url.clone()
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// A scrubbed envelope as the relay would build it.
pub fn envelope(method: &str, path: &str, body: &str, key: &str) -> NewEnvelope {
    // A body-less write (e.g. "mark read") declares no JSON body.
    let headers = if body.is_empty() {
        Vec::new()
    } else {
        vec![("content-type".to_string(), "application/json".to_string())]
    };
    intake(&IncomingWrite {
        method,
        path_and_query: path,
        headers: &headers,
        body: body.as_bytes(),
        idempotency_key: key,
        source: SourceMeta::default(),
    })
    .unwrap()
}

/// Stores envelopes directly through the engine; returns their ids in order.
pub fn seed(outbox: &Path, items: &[NewEnvelope]) -> Vec<String> {
    let mut ob = Outbox::open(outbox).unwrap();
    ob.enqueue_batch(items).unwrap();
    items.iter().map(|e| e.id.clone()).collect()
}

/// Every byte of every file in `dir` (the outbox, its -wal and -shm, the lock file).
pub fn all_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect()
}

/// POSTs `body` as JSON to `url`.
pub async fn post_json(
    c: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
) -> reqwest::Response {
    c.post(url).json(body).send().await.unwrap()
}

/// GETs `url` and reads its JSON body.
pub async fn get_json(c: &reqwest::Client, url: &str) -> serde_json::Value {
    c.get(url).send().await.unwrap().json().await.unwrap()
}

/// A stand-in upstream on a free loopback port.
pub async fn standin() -> airlock::relay::standin::StandIn {
    airlock::relay::standin::StandIn::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

//! `airlock demo`: builds a demo workspace with real data made by the engine, then opens the
//! console on it. Every bundle is produced by engine calls (enqueue, export, sign); the broken
//! ones are made the way an accident or an attacker would, then repaired only as far as the
//! scenario needs, again with engine functions (links, payload hashes, manifest digest).

use super::console::WorkspaceLayout;
use super::{Ctx, Exit};
use crate::core::bundle::{load_bundle, manifest_digest, write_bundle, Bundle, BundleHeader};
use crate::core::chain::{node_link, payload_hash};
use crate::core::hlc::{SystemWallClock, WallClock};
use crate::core::store::nodelog::{self, NewJob};
use crate::core::store::Store;
use crate::core::trust::{self, SigningKey, TrustStore};
use crate::tui::app::ConsoleConfig;
use crate::tui::theme::Theme;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use clap::Args;
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to build the demo workspace (created; must be empty or absent).
    #[arg(long, default_value = "airlock-demo")]
    pub dir: PathBuf,
    /// Build the workspace and print where it is, without opening the console.
    #[arg(long)]
    pub no_console: bool,
    /// Theme for the console (as for `airlock console --theme`).
    #[arg(long, value_name = "NAME|FILE")]
    pub theme: Option<String>,
}

/// File that marks a folder as a demo workspace, so running the demo again may rebuild it.
const DEMO_MARKER: &str = ".airlock-demo";

/// What the demo builder made.
#[derive(Debug, Clone)]
pub struct DemoWorkspace {
    pub root: PathBuf,
    pub outbox: PathBuf,
    pub bundles: PathBuf,
    pub trust_store: PathBuf,
    pub keys: PathBuf,
    /// The workspace's store: a tenant chain imported from an earlier export, with snapshots.
    pub db: PathBuf,
    pub files: Vec<String>,
}

/// Entries per batch snapshot in the demo store (small, so there are several).
pub const DEMO_BATCH_SIZE: u64 = 5;

const TENANT: &str = "acme";

fn jobs(node: &str, n: usize, salt: &str) -> Vec<NewJob> {
    const KINDS: [&str; 4] = ["scan", "sync", "rotate-keys", "export"];
    (0..n)
        .map(|i| NewJob {
            payload_json: format!(
                r#"{{"kind":"{}","target":"registry.local/app-{}:1.{}","site":"{node}","attempt":{},"ticket":"OPS-{}{salt}"}}"#,
                KINDS[i % 4],
                i % 7,
                i % 5,
                i % 3,
                4100 + i
            ),
            partition_key: Some(format!("rack-{}", i % 4)),
            idempotency_key: None,
            origin: format!("demo job {i} of {node}"),
        })
        .collect()
}

/// The demo's offline sites worked through the night: a shared simulated wall clock that starts
/// eight hours ago and moves 20 to 110 seconds per job, so HLC swimlanes and tHlc columns show a
/// realistic spread instead of one millisecond. (The engine's clock is the real one; only the wall
/// it reads is simulated, exactly as a test clock would be.)
#[derive(Clone)]
struct OfflineNight {
    next_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl OfflineNight {
    fn starting_hours_ago(hours: u64) -> Self {
        let start = crate::core::hlc::unix_ms_now().saturating_sub(hours * 3_600_000);
        OfflineNight {
            next_ms: std::sync::Arc::new(std::sync::atomic::AtomicU64::new(start)),
        }
    }
}

impl WallClock for OfflineNight {
    fn now_ms(&self) -> u64 {
        use std::sync::atomic::Ordering;
        let now = self.next_ms.load(Ordering::Relaxed);
        // A deterministic stride between 20 and 110 seconds.
        let stride = 20_000 + (now / 7 % 90) * 1_000 + now % 997;
        self.next_ms.store(now + stride, Ordering::Relaxed);
        now
    }
}

thread_local! {
    static NIGHT: std::cell::RefCell<OfflineNight> = std::cell::RefCell::new(OfflineNight::starting_hours_ago(8));
}

fn enqueue(store: &mut Store, node: &str, jobs: &[NewJob]) -> Result<()> {
    let wall = NIGHT.with(|n| n.borrow().clone());
    crate::core::store::rules::enqueue(store, TENANT, node, jobs, wall)?;
    Ok(())
}

fn export(store: &Store, node: Option<&str>, path: &Path, key: Option<&SigningKey>) -> Result<()> {
    let sign = |h: &BundleHeader| Ok(trust::sign_header(key.expect("checked"), h));
    let signer: Option<nodelog::HeaderSigner<'_>> = key.map(|_| &sign as nodelog::HeaderSigner<'_>);
    let mut out = crate::core::fsutil::AtomicFile::create(path)?;
    crate::core::store::rules::export(
        store,
        TENANT,
        node,
        node.unwrap_or("relay-01"),
        out.writer(),
        signer,
    )?;
    out.commit()?;
    Ok(())
}

fn save(bundle: &Bundle, path: &Path) -> Result<()> {
    let f = std::fs::File::create(path).wrap_err_with(|| format!("writing {}", path.display()))?;
    write_bundle(std::io::BufWriter::new(f), bundle)?;
    Ok(())
}

/// Re-links a log from entry `from` on (payload hashes, links, chain head, lastHlc) with the
/// engine's chain functions: what a forger who recomputes everything would do.
fn relink(bundle: &mut Bundle, log: usize, from: usize) {
    let l = &mut bundle.job_logs[log];
    let mut prev: Option<[u8; 32]> = from
        .checked_sub(1)
        .and_then(|p| B64.decode(&l.entries[p].link).ok())
        .and_then(|v| v.try_into().ok());
    for e in l.entries.iter_mut().skip(from) {
        let h = payload_hash(&e.payload);
        e.payload_hash = B64.encode(h);
        e.prev_link = prev.map(|p| B64.encode(p));
        let id = uuid::Uuid::parse_str(&e.job_id).expect("engine-made job id");
        let link = node_link(prev.as_ref(), &id, &e.t_hlc, &h);
        e.link = B64.encode(link);
        prev = Some(link);
    }
    if let Some(last) = l.entries.last() {
        l.chain_head = last.link.clone();
        l.last_hlc = last.t_hlc.clone();
    }
}

fn queue_writes(
    outbox: &mut crate::core::outbox::Outbox,
    writes: &[(&str, String, serde_json::Value)],
) -> Result<()> {
    use crate::core::outbox::envelope::{intake, IncomingWrite, SourceMeta};
    let mut items = Vec::new();
    for (method, path, body) in writes {
        let body = body.to_string();
        let key = uuid::Uuid::new_v4().to_string();
        let headers = vec![("content-type".to_string(), "application/json".to_string())];
        let req = IncomingWrite {
            method,
            path_and_query: path,
            headers: &headers,
            body: body.as_bytes(),
            idempotency_key: &key,
            source: SourceMeta {
                queued_because: Some("connect error: upstream unreachable (demo)".into()),
                ..SourceMeta::default()
            },
        };
        items.push(intake(&req).map_err(|r| eyre!("demo write refused: {r:?}"))?);
    }
    outbox.enqueue_batch(&items)?;
    Ok(())
}

/// An outbox as an edge relay leaves it after an outage: writes replayed once against a
/// stand-in upstream on loopback that answers some with 409 (conflict) and 400 (failed), then
/// more writes queued while the upstream was down again.
fn build_outbox(root: &Path) -> Result<PathBuf> {
    use crate::core::outbox::{replay, Outbox, ReplayOptions};
    use crate::relay::standin::StandIn;
    use serde_json::json;
    let path = WorkspaceLayout::under(root).outbox;
    let mut outbox = Outbox::open(&path)?;
    let mut first: Vec<(&str, String, serde_json::Value)> = Vec::new();
    for i in 0..4 {
        first.push((
            "POST",
            "/progress/".into(),
            json!({"session": "night-shift", "step": i, "note": format!("checkpoint {i}"), "access_token": "tok-live-7f3a"}),
        ));
    }
    for i in 0..3 {
        first.push((
            "POST",
            "/messages/".into(),
            json!({"to": "ops-lead", "subject": format!("handover {i}"), "password": "hunter2"}),
        ));
    }
    first.push(("PATCH", "/messages/m-17/read".into(), json!({"read": true})));
    first.push((
        "POST",
        "/token-events/".into(),
        json!({"model": "gpt-x", "tokens": 1200}),
    ));
    first.push((
        "POST",
        "/token-events/".into(),
        json!({"model": "gpt-x", "tokens": 800}),
    ));
    queue_writes(&mut outbox, &first)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let standin = StandIn::start("127.0.0.1:0".parse().expect("loopback address")).await?;
        standin.script(
            "/messages/m-17/read",
            409,
            json!({"error": "message m-17 was already marked read by another agent"}),
        );
        standin.script(
            "/token-events/",
            400,
            json!({"error": "unknown model gpt-x"}),
        );
        let opts = ReplayOptions::new(standin.url());
        let result = replay(&path, &opts, |_| {}).await;
        standin.stop().await;
        result.map(|_| ()).map_err(color_eyre::Report::from)
    })?;
    let mut later: Vec<(&str, String, serde_json::Value)> = Vec::new();
    for i in 4..8 {
        later.push((
            "POST",
            "/progress/".into(),
            json!({"session": "night-shift", "step": i, "note": format!("checkpoint {i}")}),
        ));
    }
    later.push((
        "POST",
        "/messages/".into(),
        json!({"to": "ops-lead", "subject": "upstream down again", "api_key": "k-123"}),
    ));
    queue_writes(&mut outbox, &later)?;
    Ok(path)
}

/// Builds the demo workspace under `root`.
pub fn build_workspace(root: &Path) -> Result<DemoWorkspace> {
    // Every workspace starts its simulated night afresh (eight hours ago).
    NIGHT.with(|n| *n.borrow_mut() = OfflineNight::starting_hours_ago(8));
    let marker = root.join(DEMO_MARKER);
    if root.exists() && std::fs::read_dir(root)?.next().is_some() {
        if !marker.is_file() {
            return Err(eyre!(
                "{} is not empty and is not an earlier demo workspace: choose a new --dir",
                crate::text::visible(&root.display().to_string())
            ));
        }
        // An earlier demo workspace (it carries our marker): build it afresh.
        std::fs::remove_dir_all(root)?;
    }
    std::fs::create_dir_all(root)?;
    std::fs::write(
        &marker,
        "made by `airlock demo`; running it again rebuilds this folder\n",
    )?;
    let layout = WorkspaceLayout::under(root);
    let bundles = layout.bundles.clone();
    let keys = layout.keys.clone();
    std::fs::create_dir_all(&bundles)?;
    let trust_store = layout.trust_store.clone();

    // A demo signing key, trusted in the workspace's own trust store.
    let generated = trust::generate_key("demo-signer", &keys)?;
    let (key, _) = trust::load_signing_key(&generated.private_path)?;
    let mut store = TrustStore::open(&trust_store)?;
    store.add_file(&generated.public_path, "demo-signer")?;
    // A key that signs but is not trusted.
    let stranger = trust::generate_key("unknown-contractor", &keys)?;
    let (stranger_key, _) = trust::load_signing_key(&stranger.private_path)?;

    let mut files = Vec::new();
    let mut file = |name: &str| {
        files.push(name.to_string());
        bundles.join(name)
    };

    // 0. An earlier export of edge-a and edge-b, already imported into the workspace's store (the
    //    tenant chain of the Scheduler screen); bundle 1 below repeats its entries, which a merge
    //    preview then shows as duplicates of the chain.
    let mut s = Store::open_in_memory()?;
    let a_jobs = jobs("edge-a", 18, "");
    let mut b_jobs = jobs("edge-b", 14, "");
    enqueue(&mut s, "edge-a", &a_jobs[..9])?;
    enqueue(&mut s, "edge-b", &b_jobs[..7])?;
    let imported_dir = root.join("imported");
    std::fs::create_dir_all(&imported_dir)?;
    let earlier = imported_dir.join("00-edge-ab.earlier.json");
    export(&s, None, &earlier, Some(&key))?;
    let db = layout.db.clone();
    import_earlier(&db, &earlier, &store.trust_set(), &key)?;

    // 1. Valid, signed, two nodes; one payload carries a bidi override (shown escaped).
    enqueue(&mut s, "edge-a", &a_jobs[9..])?;
    let b_rest = b_jobs.split_off(7);
    b_jobs = b_rest;
    b_jobs.push(NewJob {
        payload_json: r#"{"kind":"attach","file":"invoice\u202egpj.exe","site":"edge-b"}"#.into(),
        partition_key: Some("rack-0".into()),
        idempotency_key: None,
        origin: "demo hostile file name".into(),
    });
    enqueue(&mut s, "edge-b", &b_jobs)?;
    export(&s, None, &file("01-edge-ab.signed.json"), Some(&key))?;

    // 2. A chain break: three entries lost in transit (digest recomputed, so only the break shows).
    let mut s = Store::open_in_memory()?;
    enqueue(&mut s, "edge-c", &jobs("edge-c", 30, ""))?;
    let path = file("02-edge-c.chain-break.json");
    export(&s, None, &path, None)?;
    let mut b = load_bundle(&path)?;
    b.job_logs[0].entries.drain(11..14);
    b.header.manifest_digest = manifest_digest(&b.job_logs);
    save(&b, &path)?;

    // 3. A forgery that recomputes every hash, link, head and digest: only the signature catches it.
    let mut s = Store::open_in_memory()?;
    enqueue(&mut s, "edge-d", &jobs("edge-d", 20, ""))?;
    let path = file("03-edge-d.forged.json");
    export(&s, None, &path, Some(&key))?;
    let mut b = load_bundle(&path)?;
    b.job_logs[0].entries[7].payload = b.job_logs[0].entries[7]
        .payload
        .replace("registry.local", "registry.evil");
    relink(&mut b, 0, 7);
    b.header.manifest_digest = manifest_digest(&b.job_logs);
    save(&b, &path)?;

    // 4 + 5. Two bundles that conflict: one idempotency key, two payloads.
    for (node, target, name, signer) in [
        ("edge-e", "app-1:2.0", "04-edge-e.conflict.json", &key),
        ("edge-f", "app-1:2.1", "05-edge-f.conflict.json", &key),
    ] {
        let mut s = Store::open_in_memory()?;
        let mut j = jobs(node, 6, "");
        j.push(NewJob {
            payload_json: format!(
                r#"{{"kind":"deploy","target":"registry.local/{target}","site":"{node}"}}"#
            ),
            partition_key: Some("rack-1".into()),
            idempotency_key: Some("deploy-2026-01-release".into()),
            origin: format!("demo conflicting deploy on {node}"),
        });
        enqueue(&mut s, node, &j)?;
        export(&s, None, &file(name), Some(signer))?;
    }

    // 6. Signed by a key nobody trusts.
    let mut s = Store::open_in_memory()?;
    enqueue(&mut s, "edge-g", &jobs("edge-g", 8, ""))?;
    export(
        &s,
        None,
        &file("06-edge-g.untrusted.json"),
        Some(&stranger_key),
    )?;

    // 7. Not a bundle at all.
    std::fs::write(
        file("README.txt"),
        "Demo workspace made by `airlock demo`. Open it with: airlock console --dir bundles\n",
    )?;

    let outbox = build_outbox(root)?;

    Ok(DemoWorkspace {
        root: root.to_path_buf(),
        outbox,
        bundles,
        trust_store,
        keys,
        db,
        files,
    })
}

/// Imports the earlier export into the demo store with the engine's `import` (small batches, so
/// several snapshots), appends a few lifecycle actions, and takes a signed snapshot of the tail.
fn import_earlier(
    db: &Path,
    bundle: &Path,
    trust: &crate::core::trust::TrustSet,
    key: &SigningKey,
) -> Result<()> {
    use crate::core::chain::Action;
    use crate::core::import::{import, ImportOptions, ImportStatus};
    use crate::core::store::scheduler;
    let mut store = Store::open(db)?;
    let mut opts = ImportOptions::new("relay-01");
    opts.trust = Some(trust);
    opts.batch_size = DEMO_BATCH_SIZE;
    let report = import(&mut store, &[bundle.to_path_buf()], &opts)?;
    if report.status != ImportStatus::Imported {
        return Err(eyre!(
            "the demo import did not go through: {:?}",
            report.status
        ));
    }
    let first = crate::core::store::rules::chain_entries(&store, TENANT, 0, 2)?;
    let lifecycle: [(usize, &[Action]); 2] = [
        (0, &[Action::Dequeue, Action::Execute, Action::Complete]),
        (1, &[Action::Dequeue, Action::Execute, Action::Fail]),
    ];
    for (i, actions) in lifecycle {
        let Some(e) = first.get(i) else { continue };
        for a in actions {
            crate::core::store::rules::append_action(
                &store,
                TENANT,
                &e.job_id,
                *a,
                "relay-01",
                SystemWallClock,
                DEMO_BATCH_SIZE,
            )?;
        }
    }
    let signer = trust::snapshot_signer(key);
    match crate::core::store::rules::snapshot_now(
        &store,
        TENANT,
        DEMO_BATCH_SIZE,
        Some(&signer as scheduler::SnapshotSigner<'_>),
    ) {
        Ok(_) | Err(scheduler::SchedulerError::NothingToSnapshot(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

pub fn run(_ctx: &Ctx, a: DemoArgs) -> Result<Exit> {
    let ws = build_workspace(&a.dir)?;
    let shown = |p: &Path| crate::text::visible(&p.display().to_string()).into_owned();
    if a.no_console {
        println!("demo workspace: {}", shown(&ws.root));
        println!("  bundles:      {}", shown(&ws.bundles));
        println!("  trust store:  {}", shown(&ws.trust_store));
        println!("  outbox:       {}", shown(&ws.outbox));
        println!("  store:        {}", shown(&ws.db));
        for f in &ws.files {
            println!("    {}", crate::text::visible(f));
        }
        return Ok(Exit::Ok);
    }
    let theme = Theme::select(a.theme.as_deref(), Theme::no_color_env())?;
    let trust = Arc::new(TrustStore::open(&ws.trust_store)?.trust_set());
    // A stand-in upstream on loopback for the session, so replay works without a network.
    let upstream_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let standin = upstream_rt.block_on(crate::relay::standin::StandIn::start(
        "127.0.0.1:0".parse().expect("loopback address"),
    ))?;
    let config = ConsoleConfig {
        dir: ws.bundles.clone(),
        db: Some(ws.db.clone()),
        outbox: Some(ws.outbox.clone()),
        read_only: false,
        mouse: false,
        keys_dir: ws.keys.clone(),
        trust_store: ws.trust_store.clone(),
        upstream: standin.url(),
        wal: None,
    };
    let end = crate::tui::run(config, theme, trust)?;
    upstream_rt.block_on(standin.stop());
    crate::tui::exit_for(end);
    println!(
        "demo workspace kept in {}\nopen it again (same store, outbox, trust store and keys) with:\n  {}",
        shown(&ws.root),
        super::console::reopen_command(&ws.root)
    );
    Ok(Exit::Ok)
}

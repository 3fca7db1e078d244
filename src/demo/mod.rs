//! The demo workspace: real data made by the engine (node logs enqueued and exported, bundles
//! signed, an earlier export imported, an outbox replayed against a stand-in upstream, two gates'
//! write-ahead logs, a portable export announced to three webhooks), with the broken bundles and the
//! torn log an accident or an attacker would leave. `airlock demo` builds it and opens the
//! console on it; the console tests and the screenshots use it as their fixture factory.

mod bundles;
mod gates;
mod layout;
mod night;
mod notify;
mod outbox;
mod store;

pub use layout::WorkspaceLayout;
pub use store::DEMO_BATCH_SIZE;

use crate::core::store::Store;
use crate::core::trust::{self, TrustStore};
use bundles::{enqueue, export, jobs, Signers};
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use night::OfflineNight;
use std::path::{Path, PathBuf};

/// File that marks a folder as a demo workspace, so running the demo again may rebuild it.
const DEMO_MARKER: &str = ".airlock-demo";

/// The tenant of every demo bundle and of the demo store's chain.
const TENANT: &str = "acme";

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
    /// The files in `bundles`, in the order they were made.
    pub files: Vec<String>,
    /// The gates' node WALs (in `bundles`, beside the bundles: the Ledger screen folds them).
    pub wals: Vec<PathBuf>,
    /// Where the signed portable export went (its emission and deliveries are in the store).
    pub exports: PathBuf,
}

/// Makes `root` an empty folder carrying the demo marker: created when absent, rebuilt when it is
/// an earlier demo workspace, refused when it holds anything else.
fn prepare_root(root: &Path) -> Result<()> {
    let marker = root.join(DEMO_MARKER);
    if root.exists() && std::fs::read_dir(root)?.next().is_some() {
        if !marker.is_file() {
            return Err(eyre!(
                "{} is not empty and is not an earlier demo workspace: choose a new --dir",
                crate::text::visible_path(root)
            ));
        }
        // An earlier demo workspace (it carries our marker): build it afresh.
        std::fs::remove_dir_all(root)?;
    }
    if let Some(target) = std::fs::read_link(root).ok().filter(|_| !root.exists()) {
        return Err(eyre!(
            "--dir {} is a symbolic link to {}, which does not exist: create that directory or choose another --dir",
            crate::text::visible_path(root),
            crate::text::visible_path(&target)
        ));
    }
    std::fs::create_dir_all(root).wrap_err_with(|| {
        format!(
            "creating the demo workspace {}",
            crate::text::visible_path(root)
        )
    })?;
    std::fs::write(
        &marker,
        "made by `airlock demo`; running it again rebuilds this folder\n",
    )?;
    Ok(())
}

/// Builds the demo workspace under `root`.
pub fn build_workspace(root: &Path) -> Result<DemoWorkspace> {
    // Every workspace starts its simulated night afresh (eight hours ago).
    let night = OfflineNight::starting_hours_ago(8);
    prepare_root(root)?;
    let layout = WorkspaceLayout::under(root);
    std::fs::create_dir_all(&layout.bundles)?;

    // A demo signing key, trusted in the workspace's own trust store.
    let generated = trust::generate_key("demo-signer", &layout.keys)?;
    let (key, _) = trust::load_signing_key(&generated.private_path)?;
    let mut trust_store = TrustStore::open(&layout.trust_store)?;
    trust_store.add_file(&generated.public_path, "demo-signer")?;
    // A key that signs but is not trusted.
    let stranger = trust::generate_key("unknown-contractor", &layout.keys)?;
    let (stranger_key, _) = trust::load_signing_key(&stranger.private_path)?;

    // 0. An earlier export of edge-a and edge-b, already imported into the workspace's store (the
    //    tenant chain of the Scheduler screen); the bundles continue that store's node logs.
    let mut earlier = Store::open_in_memory()?;
    enqueue(&mut earlier, &night, "edge-a", &jobs("edge-a", 18, "")[..9])?;
    enqueue(&mut earlier, &night, "edge-b", &jobs("edge-b", 14, "")[..7])?;
    let imported_dir = root.join("imported");
    std::fs::create_dir_all(&imported_dir)?;
    let earlier_file = imported_dir.join("00-edge-ab.earlier.json");
    export(&earlier, None, &earlier_file, Some(&key))?;
    store::import_earlier(&layout.db, &earlier_file, &trust_store.trust_set(), &key)?;

    let signers = Signers {
        trusted: &key,
        stranger: &stranger_key,
    };
    let files = bundles::write_bundles(&layout.bundles, earlier, &night, &signers)?;
    let outbox = outbox::build_outbox(root)?;
    let wals = gates::write_gate_logs(&layout.bundles, &night)?;
    let exports = notify::export_and_notify(root, &layout.db, &night, &key)?;

    Ok(DemoWorkspace {
        root: root.to_path_buf(),
        outbox,
        bundles: layout.bundles,
        trust_store: layout.trust_store,
        keys: layout.keys,
        db: layout.db,
        files,
        wals,
        exports,
    })
}

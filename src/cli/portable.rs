//! `airlock jobs export --portable -o DIR` and `airlock jobs verify FILE.tgz`: portable exports
//! (SPEC section 10). The engine is `core::notify`; this file translates arguments and prints.

use super::output::{human_bytes, print_json, safe};
use super::{Ctx, Exit};
use crate::core::bundle::BundleFileError;
use crate::core::notify::archive::Limits;
use crate::core::notify::export::{export_portable, PortableRequest};
use crate::core::notify::portable::{open_portable, PortableError};
use crate::core::notify::store::EmissionOutcome;
use crate::core::paths;
use crate::core::text::visible_path as shown;
use crate::core::verify::{
    verify_reader_bounded, BoundedReport, Report, VerifyOptions, FINDINGS_MEMORY,
};
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

/// The FILE column of `jobs list`: portable exports are marked.
pub fn file_label(file: &str, portable: bool) -> String {
    if portable {
        format!("{} [portable]", safe(file))
    } else {
        safe(file).into_owned()
    }
}

/// The options of `jobs export --portable`.
pub struct ExportParams {
    pub tenant: String,
    pub node: Option<String>,
    pub output: Option<std::path::PathBuf>,
    pub sign: bool,
    pub key: Option<std::path::PathBuf>,
    pub json: bool,
}

/// `jobs export --portable -o DIR [--sign | --key KEY.pem] [--node N] [--json]`.
pub fn export(ctx: &Ctx, a: ExportParams) -> Result<Exit> {
    let dir = a
        .output
        .clone()
        .ok_or_else(|| eyre!("--portable needs -o DIR (the directory that receives the export)"))?;
    if !dir.exists() {
        std::fs::create_dir_all(&dir)
            .wrap_err_with(|| format!("creating the output directory {}", shown(&dir)))?;
    }
    let key = if a.sign || a.key.is_some() {
        Some(super::sign::load_key_for_signing(a.key.as_deref())?)
    } else {
        None
    };
    let store = ctx.open_existing_store()?;
    let created_by = paths::node_id(None);
    let req = PortableRequest {
        tenant: &a.tenant,
        node: a.node.as_deref(),
        created_by: &created_by,
        sign_with: key.as_ref().map(|k| &k.key),
        out_dir: &dir,
        expires_at: None,
        now_ms: crate::core::hlc::unix_ms_now(),
    };
    let e = export_portable(&store, &req).map_err(|e| eyre!("{e}"))?;
    if a.json {
        print_json(&e)?;
        return Ok(Exit::Ok);
    }
    println!(
        "exported portable export {} for tenant {}: bundle {}, {} node log(s), {} entries, {}",
        shown(&e.path),
        safe(&e.bundle.tenant_id),
        e.bundle.bundle_id,
        e.bundle.nodes.len(),
        e.bundle.entries,
        human_bytes(e.export_size_bytes)
    );
    if let Some(by) = &e.bundle.signed_by {
        println!("  signed by key {}", safe(by));
    }
    println!("  export_id       {}", e.export_id);
    println!("  artifact_sha256 {}", e.artifact_sha256);
    println!("  root_hash       {}", e.root_hash);
    if e.reused_identity {
        println!("  the logs have not changed since an earlier export: same bundle, same bytes");
    }
    match &e.emission {
        EmissionOutcome::Emitted { emission_id } => println!(
            "emitted export.airgap.ready.v1 (emission {emission_id}); `airlock notify run` delivers it"
        ),
        EmissionOutcome::AlreadyEmitted {
            emission_id,
            first_at,
        } => println!(
            "already emitted at {first_at} (emission {emission_id}): same artifact, nothing new emitted"
        ),
    }
    Ok(Exit::Ok)
}

/// `jobs verify FILE.tgz`: every checksum and the root, then the bundle's usual verification.
/// A refused archive (altered, unsafe, too large) is a failed check: exit 1.
pub fn verify(
    file: &std::path::Path,
    json: bool,
    trust: &super::TrustArgs,
    max_clock_skew: std::time::Duration,
) -> Result<Exit> {
    let name = shown(file);
    let contents = match open_portable(file, Limits::default()) {
        Ok(c) => c,
        Err(PortableError::Io { path, source }) => {
            return Err(eyre!("cannot read {path}: {source}"));
        }
        Err(e) => {
            if json {
                // The SPEC 6 object (nothing of the bundle was verified) plus `portable`.
                let mut report = Report::unverified_json();
                if let Some(obj) = report.as_object_mut() {
                    let refused = serde_json::json!({ "ok": false, "refused": e.to_string() });
                    obj.insert("portable".into(), refused);
                }
                print_json(&report)?;
            } else {
                println!("REFUSED {name}: {}", safe(&e.to_string()));
            }
            return Ok(Exit::Failed);
        }
    };
    let trusted = trust.trust()?;
    let mut opts = VerifyOptions::trusting(&trusted, trust.signature_required()?);
    opts.max_clock_skew = Some(max_clock_skew);
    // The findings past a memory budget wait in a temporary file (as for `jobs verify FILE`) and
    // are read back as the report is printed.
    let report =
        verify_reader_bounded(&contents.bundle, &opts, FINDINGS_MEMORY).map_err(|e| match e {
            BundleFileError::Syntax(e) => {
                eyre!("{name} (bundle.json inside): not a readable bundle: {e}")
            }
            e => eyre!("{name} (bundle.json inside): {e}"),
        })?;
    let portable = serde_json::json!({
        "ok": true,
        "artifactSha256": contents.artifact_sha256,
        "rootHash": contents.root_hash,
        "exportSizeBytes": contents.export_size_bytes,
        "portableSizeBytes": contents.portable_size_bytes,
        "files": contents.lines.iter().map(|l| serde_json::json!({
            "name": l.name, "sha256": hex::encode(l.sha256),
        })).collect::<Vec<_>>(),
    });
    if json {
        // The report's members and `portable`, in the order one `serde_json::Value` of them has.
        let mut members = serde_json::to_value(report.head())?;
        if let Some(obj) = members.as_object_mut() {
            obj.insert("portable".into(), portable);
        }
        print_json(&WithPortable {
            members: &members,
            report: &report,
        })?;
    } else {
        println!(
            "portable export {name}: {} file(s) match checksums.txt, root_hash {}, artifact_sha256 {}",
            contents.lines.len(),
            contents.root_hash,
            contents.artifact_sha256
        );
        let file = format!("{name} (bundle.json)");
        let mut read_back = Ok(());
        super::output::print_lines(|emit| {
            read_back = crate::report_text::each_bounded_verify_line(&file, &report, emit);
        })?;
        read_back.map_err(|e| eyre!("{file}: {e}"))?;
    }
    Ok(if report.ok() { Exit::Ok } else { Exit::Failed })
}

/// `jobs verify FILE.tgz --json`: the members of the report as one `serde_json::Value` (keys
/// sorted at every level) with its `findings` read back one at a time from `report`.
struct WithPortable<'a> {
    members: &'a serde_json::Value,
    report: &'a BoundedReport,
}

impl Serialize for WithPortable<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let members = self
            .members
            .as_object()
            .ok_or_else(|| S::Error::custom("the report is not a JSON object"))?;
        let mut map = s.serialize_map(Some(members.len()))?;
        for (key, value) in members {
            if key == "findings" {
                map.serialize_entry(key, &EveryFinding(self.report))?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// Every finding of a report, each as its own `serde_json::Value` (keys sorted, as before).
struct EveryFinding<'a>(&'a BoundedReport);

impl Serialize for EveryFinding<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for f in self.0.findings() {
            let f = f.map_err(S::Error::custom)?;
            seq.serialize_element(&serde_json::to_value(&*f).map_err(S::Error::custom)?)?;
        }
        seq.end()
    }
}

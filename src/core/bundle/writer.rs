//! Writes bundles in the layout of SPEC section 5 (two-space indented JSON, keys in spec order,
//! `signature` and `signedBy` after `jobLogs`), streaming entries so exports of any size fit in memory.

use super::model::{Bundle, BundleHeader, EntryRef};
use std::io::{self, Write};

/// Streams one bundle document to `out`. Call `begin_log` / `entry` / `end_log` per log, then `finish`.
pub struct BundleWriter<W: Write> {
    out: W,
    logs: usize,
    entries_in_log: usize,
}

fn string<W: Write>(out: &mut W, s: &str) -> io::Result<()> {
    serde_json::to_writer(&mut *out, s).map_err(io::Error::other)
}

fn field<W: Write>(
    out: &mut W,
    indent: &str,
    key: &str,
    value: Option<&str>,
    comma: bool,
) -> io::Result<()> {
    write!(out, "{indent}\"{key}\": ")?;
    match value {
        Some(v) => string(out, v)?,
        None => out.write_all(b"null")?,
    }
    if comma {
        out.write_all(b",")?;
    }
    out.write_all(b"\n")
}

impl<W: Write> BundleWriter<W> {
    /// Writes the header fields (the manifest digest must already be known).
    pub fn new(mut out: W, header: &BundleHeader) -> io::Result<Self> {
        out.write_all(b"{\n")?;
        field(&mut out, "  ", "bundleId", Some(&header.bundle_id), true)?;
        field(&mut out, "  ", "tenantId", Some(&header.tenant_id), true)?;
        field(&mut out, "  ", "createdAt", Some(&header.created_at), true)?;
        field(
            &mut out,
            "  ",
            "createdByNodeId",
            Some(&header.created_by_node_id),
            true,
        )?;
        field(
            &mut out,
            "  ",
            "manifestDigest",
            Some(&header.manifest_digest),
            true,
        )?;
        out.write_all(b"  \"jobLogs\": [")?;
        Ok(BundleWriter {
            out,
            logs: 0,
            entries_in_log: 0,
        })
    }

    pub fn begin_log(&mut self, node_id: &str, last_hlc: &str, chain_head: &str) -> io::Result<()> {
        let out = &mut self.out;
        out.write_all(if self.logs == 0 { b"\n" } else { b",\n" })?;
        out.write_all(b"    {\n")?;
        field(out, "      ", "nodeId", Some(node_id), true)?;
        field(out, "      ", "lastHlc", Some(last_hlc), true)?;
        field(out, "      ", "chainHead", Some(chain_head), true)?;
        out.write_all(b"      \"entries\": [")?;
        self.entries_in_log = 0;
        Ok(())
    }

    pub fn entry(&mut self, e: &EntryRef<'_>) -> io::Result<()> {
        let out = &mut self.out;
        out.write_all(if self.entries_in_log == 0 {
            b"\n"
        } else {
            b",\n"
        })?;
        const I: &str = "          ";
        out.write_all(b"        {\n")?;
        field(out, I, "nodeId", Some(&e.node_id), true)?;
        field(out, I, "tHlc", Some(&e.t_hlc), true)?;
        field(out, I, "jobId", Some(&e.job_id), true)?;
        if let Some(pk) = &e.partition_key {
            field(out, I, "partitionKey", Some(pk), true)?;
        }
        field(out, I, "payload", Some(&e.payload), true)?;
        field(out, I, "payloadHash", Some(&e.payload_hash), true)?;
        field(out, I, "prevLink", e.prev_link.as_deref(), true)?;
        field(out, I, "link", Some(&e.link), true)?;
        field(out, I, "enqueuedAt", Some(&e.enqueued_at), false)?;
        out.write_all(b"        }")?;
        self.entries_in_log += 1;
        Ok(())
    }

    pub fn end_log(&mut self) -> io::Result<()> {
        if self.entries_in_log > 0 {
            self.out.write_all(b"\n      ]\n    }")?;
        } else {
            self.out.write_all(b"]\n    }")?;
        }
        self.logs += 1;
        Ok(())
    }

    /// Closes the document, adding the signature fields when given. Returns the writer.
    pub fn finish(mut self, signature: Option<(&str, &str)>) -> io::Result<W> {
        let out = &mut self.out;
        if self.logs > 0 {
            out.write_all(b"\n  ]")?;
        } else {
            out.write_all(b"]")?;
        }
        match signature {
            Some((sig, by)) => {
                out.write_all(b",\n")?;
                field(out, "  ", "signature", Some(sig), true)?;
                field(out, "  ", "signedBy", Some(by), false)?;
            }
            None => out.write_all(b"\n")?,
        }
        out.write_all(b"}\n")?;
        out.flush()?;
        Ok(self.out)
    }
}

/// Writes an in-memory bundle (its header's manifest digest is written as it is).
pub fn write_bundle<W: Write>(out: W, bundle: &Bundle) -> io::Result<W> {
    let mut w = BundleWriter::new(out, &bundle.header)?;
    for log in &bundle.job_logs {
        w.begin_log(&log.node_id, &log.last_hlc, &log.chain_head)?;
        for e in &log.entries {
            w.entry(&EntryRef::from(e))?;
        }
        w.end_log()?;
    }
    let sig = match (&bundle.header.signature, &bundle.header.signed_by) {
        (Some(s), Some(b)) => Some((s.as_str(), b.as_str())),
        _ => None,
    };
    w.finish(sig)
}

/// The bundle as bytes.
pub fn bundle_to_vec(bundle: &Bundle) -> Vec<u8> {
    write_bundle(Vec::new(), bundle).expect("writing to a Vec cannot fail")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::bundle::reader::load_bundle;
    use std::path::Path;

    #[test]
    fn rewriting_the_vectors_reproduces_them_byte_for_byte() {
        for name in ["two-nodes.json", "two-nodes-signed.json"] {
            let path = Path::new("../shared/vectors/bundles").join(name);
            let bundle = load_bundle(&path).unwrap();
            let ours = bundle_to_vec(&bundle);
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                std::fs::read_to_string(&path).unwrap(),
                "{name}"
            );
        }
    }
}

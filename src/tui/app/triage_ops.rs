//! `E` on Chain, Merge preview or Scheduler: asks for the operator's decision, then writes a
//! triage report (`core::triage`: JSON in a DSSE envelope, signed with the local key when there
//! is one, and Markdown) beside the store.

use super::{App, Overlay};
use crate::core::triage::{Decision, TriageReport};
use crate::tui::action::ScreenId;
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::path::{Path, PathBuf};

/// The key a console report is signed with, and what the operator must hear about it: the
/// engine's warnings about the key file (e.g. readable by other users) and why a key was not used.
pub struct LocalSigner {
    pub key: Option<crate::core::trust::SigningKey>,
    pub warnings: Vec<String>,
}

/// The local signing key: the configured default (`keys default`, `$AIRLOCK_SIGNING_KEY`), else
/// the first readable key pair in the console's keys directory; none when there is no key. The
/// warnings are the engine's (`load_signing_key`, the key listing), never the console's own.
pub fn local_signing_key(keys_dir: &Path) -> LocalSigner {
    // The configured default, only while its file still holds the key recorded for it (as `jobs
    // sign` requires): a swapped key file signs nothing, and the report says why it is unsigned.
    if let Some(default) = crate::core::trust::default_signing_key().ok().flatten() {
        return match default.load() {
            Ok((key, warnings)) => LocalSigner {
                key: Some(key),
                warnings,
            },
            Err(e) => LocalSigner {
                key: None,
                warnings: vec![format!("the default signing key was not used: {e}")],
            },
        };
    }
    let keys = crate::core::trust::key_dir::local_keys(keys_dir).unwrap_or_default();
    let usable = keys
        .iter()
        .find_map(|k| k.private_path.as_ref().filter(|_| k.problem.is_none()));
    if let Some((key, warnings)) =
        usable.and_then(|path| crate::core::trust::load_signing_key(path).ok())
    {
        return LocalSigner {
            key: Some(key),
            warnings,
        };
    }
    // No key signs: say why each key pair there was passed over.
    LocalSigner {
        key: None,
        warnings: keys
            .iter()
            .filter(|k| k.private_path.is_some())
            .filter_map(|k| {
                let problem = k.problem.as_ref()?;
                Some(format!("key {} was not used: {problem}", k.name))
            })
            .collect(),
    }
}

/// `text` after the engine's `warnings` (first, so a narrow status bar still shows them), or
/// `None` when there is none.
pub fn with_warnings(warnings: &[String], text: &str) -> Option<String> {
    (!warnings.is_empty()).then(|| format!("{} — {text}", warnings.join("; ")))
}

/// Splits `reject tampered link` into the decision word and the note.
pub fn parse_decision(input: &str) -> Decision {
    let input = input.trim();
    let (action, note) = input.split_once(' ').unwrap_or((input, ""));
    Decision {
        action: if action.is_empty() {
            "none".into()
        } else {
            action.to_lowercase()
        },
        note: note.trim().to_string(),
    }
}

impl App {
    /// `E`: what the report would be about, or why there is nothing to report yet.
    pub(super) fn start_triage(&mut self) {
        let ready = match self.screen {
            ScreenId::Chain => self.chain.index().is_some(),
            ScreenId::Merge => self.merge.plan().is_some(),
            ScreenId::Scheduler => self.scheduler.report.is_some(),
            _ => false,
        };
        if !ready {
            let why = match self.screen {
                ScreenId::Scheduler => "no verification yet: v verifies the chain first",
                ScreenId::Merge => "no plan yet",
                _ => "no bundle open",
            };
            self.say(Level::Info, why);
            return;
        }
        self.overlay = Some(Overlay::Decision {
            input: String::new(),
        });
    }

    /// The report of the current screen with the operator's decision.
    pub(super) fn triage_report(&self, decision: Decision) -> Option<TriageReport> {
        match self.screen {
            ScreenId::Chain => {
                let index = self.chain.index()?;
                let file = crate::text::visible_path(&index.path);
                Some(TriageReport::for_bundle(&file, &index.report, decision))
            }
            ScreenId::Merge => Some(TriageReport::for_plan(
                self.merge.plan()?,
                self.merge.lines.to_vec(),
                decision,
            )),
            ScreenId::Scheduler => Some(TriageReport::for_chain(
                self.scheduler.report.as_ref()?,
                decision,
            )),
            _ => None,
        }
    }

    /// Writes the report in the background (signing reads a key file).
    pub(super) fn write_triage(&mut self, input: &str) {
        if self.refuse_read_only_write(crate::tui::action::Action::TriageReport) {
            return;
        }
        let Some(report) = self.triage_report(parse_decision(input)) else {
            self.say(Level::Info, "nothing to report on this screen");
            return;
        };
        let dir = self.report_dir();
        let keys_dir = self.config.keys_dir.clone();
        let stem = format!(
            "triage-{}-{}",
            report.created_at.replace([':', '.'], "-"),
            report.verdict
        );
        self.tasks.spawn(move |tx| {
            let signer = local_signing_key(&keys_dir);
            let result =
                crate::core::triage::write_report(&report, &dir, &stem, signer.key.as_ref())
                    .map_err(|e| e.to_string());
            let _ = tx.send(TaskMsg::TriageWritten {
                result,
                warnings: signer.warnings,
            });
        });
    }

    /// Where reports and proofs go: beside the store, else the current directory.
    pub(super) fn report_dir(&self) -> PathBuf {
        self.config
            .db
            .as_ref()
            .and_then(|d| d.parent().map(|p| p.to_path_buf()))
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| ".".into())
    }

    /// The report written (or not), with the engine's warnings about its signing key.
    pub(super) fn on_triage_written(
        &mut self,
        result: Result<crate::core::triage::Written, String>,
        warnings: Vec<String>,
    ) -> bool {
        match result {
            Ok(w) => {
                let json = crate::text::visible_path(&w.json);
                let signed = match &w.signed_by {
                    Some(k) => format!("signed by key {}", &k[..k.len().min(16)]),
                    None if warnings.is_empty() => "unsigned: no local signing key".into(),
                    None => "unsigned".into(),
                };
                let text =
                    format!("triage report {json} (+ .md), {signed}: airlock triage verify {json}");
                match with_warnings(&warnings, &text) {
                    Some(text) => self.say(Level::Warning, text),
                    None => self.say(Level::Ok, text),
                }
            }
            Err(e) => {
                let text = format!("triage report not written: {e}");
                let text = with_warnings(&warnings, &text).unwrap_or(text);
                self.say(Level::Error, text)
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_word_and_note() {
        let d = parse_decision("  Reject  tampered link ");
        assert_eq!(
            (d.action.as_str(), d.note.as_str()),
            ("reject", "tampered link")
        );
        assert_eq!(parse_decision("").action, "none");
        assert_eq!(parse_decision("import").note, "");
    }
}

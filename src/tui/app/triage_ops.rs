//! `E` on Chain, Merge preview or Scheduler: asks for the operator's decision, then writes a
//! triage report (`core::triage`: JSON in a DSSE envelope, signed with the local key when there
//! is one, and Markdown) beside the store.

use super::{App, Overlay};
use crate::core::triage::{Decision, TriageReport};
use crate::tui::action::ScreenId;
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::path::PathBuf;

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
            let signer = crate::core::trust::report_signer(&keys_dir);
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

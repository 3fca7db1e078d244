//! The Keys screen: keys-and-trust operations, their confirmations.

use super::{App, Overlay, PendingOp};
use crate::core::bundle::catalog::ListingKind;
use crate::core::trust::key_dir::LocalKey;
use crate::tui::action::Action;
use crate::tui::screens::keys::{KeyOp, KeysPane};
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;
use std::path::PathBuf;

impl App {
    /// Runs a keys-and-trust operation in the background.
    pub(super) fn run_key_op(&mut self, op: KeyOp) {
        let keys_dir = self.config.keys_dir.clone();
        let trust_store = self.config.trust_store.clone();
        let trust = self.trust.clone();
        let audit = self.audit_store();
        self.tasks.spawn(move |tx| {
            let entry = super::audit_ops::key_op_record(&op);
            let result = op.run(&keys_dir, &trust_store, &trust);
            if let (Ok(_), Some((action, inputs))) = (&result, entry) {
                super::audit_ops::record(&audit, action, inputs);
            }
            let _ = tx.send(TaskMsg::KeyOpDone(result));
        });
    }

    /// The selected local key and one of its files (`which`: "public" or "private"), or `None`
    /// after telling the user which is missing.
    fn selected_key_file(
        &mut self,
        which: &str,
        file: impl Fn(&LocalKey) -> Option<PathBuf>,
    ) -> Option<(LocalKey, PathBuf)> {
        let Some(k) = self.keys.selected_local().cloned() else {
            self.say(Level::Info, "no local key selected (c generates one)");
            return None;
        };
        let Some(path) = file(&k) else {
            self.say(
                Level::Warning,
                format!("key {} has no {which} key file", k.name),
            );
            return None;
        };
        Some((k, path))
    }

    /// Says that a bundle must be selected first; the key is handled.
    fn no_bundle_selected(&mut self) -> ControlFlow<bool> {
        self.say(
            Level::Info,
            "select a bundle on the Bundles screen (1) first",
        );
        ControlFlow::Break(true)
    }

    /// The Keys screen's actions (routed here by [`App::apply`]).
    pub(super) fn keys_action(&mut self, a: Action) -> ControlFlow<bool> {
        match a {
            Action::PrevPane => self.keys.pane = KeysPane::Local,
            Action::NextPane => self.keys.pane = KeysPane::Trusted,
            Action::CreateKey => {
                self.overlay = Some(Overlay::KeyName {
                    input: self.keys.fresh_name(),
                })
            }
            Action::TrustKey => {
                let Some((k, public_path)) =
                    self.selected_key_file("public", |k| k.public_path.clone())
                else {
                    return ControlFlow::Break(true);
                };
                let store = crate::text::visible_path(&self.config.trust_store);
                self.confirm(
                    "Trust this key?",
                    vec![
                        format!("Add key {} to the trust store", k.name),
                        format!("  key id {}", k.key_id.clone().unwrap_or_default()),
                        format!("  store  {store}"),
                        "Bundles signed by it will verify as trusted.".into(),
                    ],
                    PendingOp::Key(KeyOp::Trust {
                        public_path,
                        name: k.name,
                    }),
                );
            }
            Action::UntrustKey => {
                let Some(k) = self.keys.selected_trusted().cloned() else {
                    self.say(
                        Level::Info,
                        "no trusted key selected (→ focuses the trusted keys)",
                    );
                    return ControlFlow::Break(true);
                };
                self.confirm(
                    "Untrust this key?",
                    vec![
                        format!("Remove {} ({}) from the trust store.", k.name, k.key_id),
                        "Bundles it signed will then fail verification with signer-untrusted."
                            .into(),
                    ],
                    PendingOp::Key(KeyOp::Untrust { name: k.name }),
                );
            }
            Action::SignBundle => {
                let Some(row) = self.selected_bundle() else {
                    return self.no_bundle_selected();
                };
                let bundle = row.path.clone();
                let file = row.file_name();
                let existing = match row.listing.as_ref().map(|l| &l.kind) {
                    Some(ListingKind::Bundle { signed_by, .. }) => signed_by.clone(),
                    _ => None,
                };
                let Some((k, private_path)) =
                    self.selected_key_file("private", |k| k.private_path.clone())
                else {
                    return ControlFlow::Break(true);
                };
                let mut lines = vec![
                    format!("Sign {file} with key {}", k.name),
                    format!("  key id {}", k.key_id.clone().unwrap_or_default()),
                    "The file is rewritten in place (atomically) with signature and signedBy."
                        .into(),
                ];
                if let Some(old) = existing {
                    lines.push(format!(
                        "It is already signed by {old}: that signature will be OVERWRITTEN."
                    ));
                }
                self.confirm(
                    "Sign this bundle?",
                    lines,
                    PendingOp::Key(KeyOp::Sign {
                        bundle,
                        private_path,
                    }),
                );
            }
            Action::CheckSignature => {
                let Some(row) = self.selected_bundle() else {
                    return self.no_bundle_selected();
                };
                let bundle = row.path.clone();
                self.run_key_op(KeyOp::Check { bundle });
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

impl App {
    pub(super) fn on_key_op_done(
        &mut self,
        result: Result<crate::tui::screens::keys::KeyOpDone, String>,
    ) -> bool {
        match result {
            Ok(done) => {
                if done.trust_changed {
                    self.reload_trust();
                }
                match super::triage_ops::with_warnings(&done.warnings, &done.text) {
                    // Warnings raise a success to a warning; they never soften a failure.
                    Some(text) if done.level != Level::Error => self.say(Level::Warning, text),
                    Some(text) => self.say(done.level, text),
                    None => self.say(done.level, done.text),
                }
            }
            Err(e) => self.say(Level::Error, e),
        }
        self.keys
            .reload(&self.config.keys_dir, &self.config.trust_store);
        true
    }
}

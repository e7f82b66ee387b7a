//! The dry-run rendering of a [`Plan`]: every step with the exact API
//! calls it would make.

use std::fmt::Write as _;

use super::{Action, Plan};
use crate::text::quoted;

impl Plan {
    /// Human text: every step with the exact API calls it would make.
    pub fn render_dry_run(&self) -> String {
        let mut out = String::new();
        let mutating = self.mutating_steps().count();
        let _ = writeln!(
            out,
            "Plan (dry run, nothing is changed): {} step(s), {mutating} would change the cluster; least force first",
            self.steps.len()
        );
        for (i, step) in self.steps.iter().enumerate() {
            let _ = writeln!(
                out,
                "{:>2}. [force {}] {} (finding #{})",
                i + 1,
                step.force_level,
                step.action.name(),
                // Findings are numbered from 1 where reports list them.
                step.finding_index + 1
            );
            match &step.action {
                Action::Wait { reason } => {
                    let _ = writeln!(out, "    no API call; waiting: {reason}");
                }
                Action::Refuse { reason, .. } => {
                    let _ = writeln!(out, "    no API call; refused: {reason}");
                }
                Action::RemoveFinalizers(r) => {
                    let path = r.target.api_path();
                    let _ = writeln!(out, "    GET {path} (save the manifest first)");
                    let _ = writeln!(
                        out,
                        "    PATCH {path} (application/json-patch+json) {}",
                        r.json_patch()
                    );
                    let _ = writeln!(
                        out,
                        "    finalizers [{}] -> [{}]",
                        r.current.join(", "),
                        r.kept().join(", ")
                    );
                }
                Action::DeleteApiService(d) => {
                    let path = d.api_path();
                    let _ = writeln!(
                        out,
                        "    GET {path} (save the manifest first; re-apply it to undo)"
                    );
                    let _ = writeln!(
                        out,
                        "    DELETE {path} (precondition uid={}, resourceVersion={})",
                        d.uid, d.resource_version
                    );
                }
                Action::SetWebhookFailurePolicy(w) => {
                    let path = w.api_path();
                    let _ = writeln!(
                        out,
                        "    GET {path} (save the manifest first; re-apply it to restore failurePolicy Fail)"
                    );
                    let _ = writeln!(
                        out,
                        "    PATCH {path} (application/json-patch+json) {}",
                        w.json_patch()
                    );
                    let _ = writeln!(
                        out,
                        "    needs --allow-webhook-changes besides --apply: the webhook fails open until restored"
                    );
                }
                Action::SetCrdConversionNone(c) => c.render(&mut out),
                Action::FinalizeNamespace(f) => {
                    let _ = writeln!(
                        out,
                        "    GET /api/v1/namespaces/{} (save the manifest first; it is the PUT body)",
                        f.name
                    );
                    let _ = writeln!(
                        out,
                        "    PUT {} (spec.finalizers [{}] -> [{}]; uid={}, resourceVersion={})",
                        f.api_path(),
                        f.current.join(", "),
                        f.kept().join(", "),
                        f.uid,
                        f.resource_version.as_deref().unwrap_or("as read")
                    );
                }
            }
            let repeated =
                matches!(&step.action, Action::Refuse { reason, .. } if *reason == step.rationale);
            if !repeated {
                let _ = writeln!(out, "    why: {}", step.rationale);
            }
        }
        self.render_expected(&mut out);
        out
    }

    /// "Expected in later rounds": what the fail-open steps will reveal.
    fn render_expected(&self, out: &mut String) {
        if self.expected.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "Expected in later rounds (not steps yet: each is planned again, on a fresh read, by the round of --apply --yes that meets it):"
        );
        for e in &self.expected {
            let _ = writeln!(
                out,
                "  - {}: once webhook {} (finding #{}) fails open, the namespace controller's DELETE goes through and it hangs on its finalizers",
                e.object,
                quoted(&e.webhook),
                e.webhook_finding + 1
            );
            for k in &e.keys {
                let _ = writeln!(
                    out,
                    "    {} (owner {} now): {}",
                    k.finalizer, k.owner, k.then
                );
            }
        }
    }
}

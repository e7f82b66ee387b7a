//! What the scaffold re-creates of the blockers the doctor proved (a dead
//! APIService, a dead webhook), and the deletion of the stuck namespaces
//! with the conditions they showed.

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Namespace;
use serde_json::{Value, json};

use super::Draft;
use super::fixtures::{file_part, yaml};
use crate::doctor::{DeadWebhookFacts, Finding, FindingDetail, Snapshot, WebhookConfigKind};

impl Draft<'_> {
    /// The blockers the doctor proved, re-created as they were.
    pub(super) fn blockers(&mut self, findings: &[Finding], snapshot: &Snapshot) {
        for f in findings {
            match &f.detail {
                FindingDetail::DeadApiService(_) => self.api_service(f, snapshot),
                FindingDetail::DeadWebhook(DeadWebhookFacts { configuration, .. }) => {
                    self.allow_webhooks = true;
                    self.webhook(f, *configuration, snapshot);
                }
                _ => {}
            }
        }
    }

    fn api_service(&mut self, f: &Finding, snapshot: &Snapshot) {
        let Some(api) = snapshot
            .api_services
            .iter()
            .find(|a| a.metadata.name.as_deref() == Some(f.subject.name.as_str()))
        else {
            return;
        };
        let doc = json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": f.subject.name},
            "spec": api.spec,
        });
        let file = format!(
            "{}/apiservice-{}.yaml",
            self.name,
            file_part(&f.subject.name)
        );
        self.fixtures.push((
            file.clone(),
            yaml(
                &format!("# The APIService the doctor proved dead: {}\n", f.summary),
                &doc,
            ),
        ));
        let _ = writeln!(self.steps, "  - apply: {}", file);
        let _ = writeln!(
            self.recovered,
            "        - gone: {{kind: APIService, name: {}}}\n        - discoveryComplete: {{}}",
            f.subject.name
        );
    }

    fn webhook(&mut self, f: &Finding, configuration: WebhookConfigKind, snapshot: &Snapshot) {
        let named = |name: &Option<String>| name.as_deref() == Some(f.subject.name.as_str());
        let doc: Option<Value> = match configuration {
            WebhookConfigKind::Validating => snapshot
                .validating_webhooks
                .iter()
                .find(|w| named(&w.metadata.name))
                .map(|w| json!({"webhooks": w.webhooks})),
            WebhookConfigKind::Mutating => snapshot
                .mutating_webhooks
                .iter()
                .find(|w| named(&w.metadata.name))
                .map(|w| json!({"webhooks": w.webhooks})),
        };
        let Some(mut doc) = doc else {
            return;
        };
        doc["apiVersion"] = json!("admissionregistration.k8s.io/v1");
        doc["kind"] = json!(configuration.kind());
        doc["metadata"] = json!({"name": f.subject.name});
        let file = format!("{}/webhook-{}.yaml", self.name, file_part(&f.subject.name));
        self.fixtures.push((
            file.clone(),
            yaml(
                &format!(
                    "# The webhook configuration the doctor proved dead: {}\n# Scope it (objectSelector or namespaceSelector) so that scenarios running beside it are not affected.\n",
                    f.summary
                ),
                &doc,
            ),
        ));
        let _ = writeln!(self.steps, "  - apply: {}", file);
    }

    /// The objects' deletes, then each stuck namespace's: Terminating with
    /// the conditions it showed as the symptom, gone with nothing left in
    /// storage at the end.
    pub(super) fn namespace_deletes(&mut self, stuck: &[&Namespace]) {
        let deletes = std::mem::take(&mut self.deletes);
        self.steps.push_str(&deletes);
        for ns in stuck {
            let nsname = ns.metadata.name.clone().unwrap_or_default();
            let _ = writeln!(
                self.steps,
                "  - delete: {{kind: Namespace, name: {nsname}}}"
            );
            let _ = writeln!(
                self.symptoms,
                "        - terminating: {{kind: Namespace, name: {nsname}}}"
            );
            for c in ns
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .filter(|c| c.status == "True")
            {
                let _ = write!(
                    self.symptoms,
                    "        - namespaceCondition: {{namespace: {nsname}, type: {}, status: \"True\"",
                    c.type_
                );
                if let Some(reason) = &c.reason {
                    let _ = write!(self.symptoms, ", reason: {reason}");
                }
                self.symptoms.push_str("}\n");
                if let Some(message) = &c.message {
                    let _ = writeln!(self.symptoms, "          # message was: {message}");
                }
            }
            let _ = writeln!(
                self.recovered,
                "        - gone: {{kind: Namespace, name: {nsname}}}\n        - noContentLeft: {{namespace: {nsname}}}"
            );
        }
    }
}

//! Admission webhook findings: webhooks that fail closed with a backend
//! proven gone, and the helpers that say why a webhook is (not) judged dead
//! for the namespace and pod detectors.

use std::collections::BTreeSet;

use super::Diagnosis;
use super::namespace::ContentFailure;
use crate::doctor::conditions::NS_CONTENT_FAILURE;
use crate::doctor::model::{
    DeadWebhookFacts, Finding, FindingDetail, ServiceKey, WebhookId, WebhookView,
};
use crate::doctor::webhook::webhooks;
use crate::text::quoted;

impl<'a> Diagnosis<'a> {
    /// DeadWebhook findings; returns which webhooks are dead (by identity:
    /// a name may be held by several). Dead
    /// only on proof: `failurePolicy: Fail`, a Service backend, and the
    /// collector's lookup found no such Service or no ready endpoint.
    pub(super) fn dead_webhooks(
        &self,
        failures: &[ContentFailure<'_>],
        findings: &mut Vec<Finding>,
    ) -> BTreeSet<WebhookId> {
        let mut dead = BTreeSet::new();
        for w in webhooks(self.snapshot) {
            let Some((service, backend, backend_lines)) = self.dead_backend(&w) else {
                continue;
            };
            let kind = w.config_kind.kind();
            let mut evidence = vec![format!(
                "{kind} {} webhook {} (failurePolicy {}) calls Service {service}",
                w.config_name,
                quoted(w.name),
                w.failure_policy
            )];
            evidence.extend(backend_lines);
            evidence.push(format!("it matches: {}", w.rules_line()));
            let blocks = super::namespace::namespaces_blaming(failures, &w);
            for ns in &blocks {
                evidence.push(format!(
                    "blocks deletion of namespace {ns}: its {NS_CONTENT_FAILURE} condition quotes failed calling webhook {}",
                    quoted(w.name)
                ));
            }
            if blocks.is_empty() {
                evidence.push(format!(
                    "no Terminating namespace names it yet, but every operation it matches is rejected while its backend is gone{}",
                    if w.matches_operation("UPDATE") {
                        " (finalizer-removal patches included)"
                    } else {
                        ""
                    }
                ));
            }
            dead.insert(w.id());
            findings.push(Finding {
                subject: w.config_ref(),
                summary: format!(
                    "webhook {} in {kind} {} fails closed and its backend is gone ({backend}){}",
                    quoted(w.name),
                    w.config_name,
                    if blocks.is_empty() {
                        String::new()
                    } else {
                        format!("; it blocks deletion of namespace(s) {}", blocks.join(", "))
                    }
                ),
                evidence,
                detail: FindingDetail::DeadWebhook(DeadWebhookFacts {
                    configuration: w.config_kind,
                    configuration_name: w.config_name.to_owned(),
                    index: w.index,
                    webhook: w.name.to_owned(),
                    failure_policy: w.failure_policy.to_owned(),
                    service,
                    backend: backend.to_owned(),
                    rules: w.rules_line(),
                    blocks_namespaces: blocks,
                    rejects: Vec::new(),
                }),
            });
        }
        dead
    }
}

impl Diagnosis<'_> {
    /// The proof that a webhook rejects everything it matches: it fails
    /// closed (`failurePolicy: Fail`), calls a Service, and the collector's
    /// lookup proves that Service's backend gone ([`crate::doctor::backend::judge`]).
    /// The Service, the reason (`ServiceNotFound` / `NoReadyEndpoints`)
    /// and the evidence lines; `None` without that proof (a URL webhook,
    /// an ExternalName or selectorless Service, a backend restarting, a
    /// lookup that failed or was not made).
    fn dead_backend(&self, w: &WebhookView<'_>) -> Option<(ServiceKey, &'static str, Vec<String>)> {
        if w.failure_policy != "Fail" {
            return None;
        }
        let service = w.service()?;
        let j = crate::doctor::backend::judge(self.snapshot.service_lookup(&service));
        match j.state {
            crate::doctor::backend::BackendState::Gone(reason) => {
                Some((service, reason, j.evidence))
            }
            _ => None,
        }
    }

    /// Why the backend of webhook `name` is not proven gone, for the
    /// report: `blamed` are the registered webhooks of that name the
    /// failure can be ([`crate::doctor::webhook::may_have_failed`]).
    pub(super) fn backend_not_proven(&self, name: &str, blamed: &[WebhookView<'_>]) -> Vec<String> {
        if blamed.is_empty() {
            return vec![format!(
                "no registered webhook {name} can have failed this call (none of that name, or none whose namespaceSelector and Service match it): it is not registered any more",
                name = quoted(name)
            )];
        }
        let mut lines = Vec::new();
        for w in blamed {
            let whose = format!(
                "webhook {} of {} {}",
                quoted(name),
                w.config_kind.kind(),
                w.config_name
            );
            match w.service() {
                None => lines.push(format!(
                    "{whose} calls a URL ({}); a URL backend is never judged gone",
                    w.client_config.url.as_deref().unwrap_or("?"),
                )),
                Some(service) => lines.extend(
                    crate::doctor::backend::judge(self.snapshot.service_lookup(&service))
                        .evidence
                        .into_iter()
                        .map(|e| format!("{whose}: {e}")),
                ),
            }
        }
        lines
    }

    /// Webhooks with a dead backend ([`Diagnosis::dead_backend`]) that
    /// match DELETE of pods: each rejects the kubelet's final DELETE of a
    /// pod whose containers are gone. One evidence line each.
    pub(super) fn dead_webhooks_on_pod_delete(
        &self,
        pod: &k8s_openapi::api::core::v1::Pod,
    ) -> Vec<String> {
        webhooks(self.snapshot)
            .iter()
            .filter(|w| w.matches_final_delete_of(pod, self.snapshot))
            .filter_map(|w| {
                let (service, _, _) = self.dead_backend(w)?;
                Some(format!(
                    "{} {} webhook {} (failurePolicy Fail) matches pod DELETE and its Service {service} has no backend: the kubelet's final DELETE (grace 0) is rejected, as a --force delete would be",
                    w.config_kind.kind(),
                    w.config_name,
                    quoted(w.name)
                ))
            })
            .collect()
    }
}

//! Webhooks whose backend is there but fails the apiserver's calls:
//! slow (no answer within the timeout) or misconfigured (TLS that does not
//! verify, an HTTP error, a review it cannot use), read from the error the
//! namespace controller's deletes got ([`crate::doctor::backend::classify`]).
//!
//! This is not "dead". A backend proven gone may be failed open: nothing
//! is there to check anything. A backend that hangs or answers wrongly is
//! a policy engine that is down or broken right now; failing it open lets
//! through what it exists to stop, and the failure is one a person can
//! repair. So the finding names the cause with the apiserver's words and
//! the backend's endpoints, and the plan advises; nothing is changed.

use std::collections::BTreeSet;

use super::Diagnosis;
use super::namespace::ContentFailure;
use crate::doctor::admission::selector_matches;
use crate::doctor::backend::{BackendState, CallFailure, CallVerdict, Misconfiguration, classify};
use crate::doctor::conditions::{NS_CONTENT_FAILURE, failing_namespace_condition};
use crate::doctor::finding::{Finding, FindingDetail, FindingKind, ObjectRef};
use crate::doctor::webhook::webhooks;

fn verdict_name(v: &CallVerdict) -> &'static str {
    match v {
        CallVerdict::Unreachable => "unreachable",
        CallVerdict::Slow => "slow",
        CallVerdict::Misconfigured(Misconfiguration::Tls) => "misconfigured: TLS",
        CallVerdict::Misconfigured(Misconfiguration::ServerError) => "misconfigured: HTTP error",
        CallVerdict::Misconfigured(Misconfiguration::BadReview) => "misconfigured: bad review",
    }
}

impl Diagnosis<'_> {
    /// WebhookBackendFailing findings, for fail-closed webhooks that are
    /// not dead (`dead`) and that a Terminating namespace's content failure
    /// names with a slow or misconfigured call.
    pub(super) fn failing_webhooks(
        &self,
        failures: &[ContentFailure<'_>],
        dead: &BTreeSet<String>,
        findings: &mut Vec<Finding>,
    ) {
        // Each failing namespace: its name, labels, the condition's words
        // and what its call showed.
        let mut failing = Vec::new();
        for f in failures {
            let Some(ns) = self
                .snapshot
                .namespaces
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(f.namespace))
            else {
                continue;
            };
            let Some(message) = failing_namespace_condition(ns, NS_CONTENT_FAILURE)
                .and_then(|c| c.message.as_deref())
            else {
                continue;
            };
            let Some(call) = classify(message) else {
                continue;
            };
            if call.verdict == CallVerdict::Unreachable {
                // Not reached at all: the gone/unknown verdict covers it.
                continue;
            }
            failing.push((f, ns, message, call));
        }
        for w in webhooks(self.snapshot) {
            if w.failure_policy != "Fail" || dead.contains(w.name) {
                continue;
            }
            // The error names the webhook, not its configuration: two
            // configurations may hold webhooks of one name. It is this one
            // only if it could have been called for that namespace (its
            // namespaceSelector) and, where the error quotes the URL,
            // through its own Service.
            let calls: Vec<(&str, &CallFailure)> = failing
                .iter()
                .filter(|(f, _, _, _)| f.webhooks.iter().any(|n| n == w.name))
                .filter(|(_, ns, _, _)| {
                    w.namespace_selector.is_none_or(|sel| {
                        let labels = ns.metadata.labels.clone().unwrap_or_default();
                        selector_matches(sel, &labels)
                    })
                })
                .filter(|(_, _, message, _)| {
                    !message.contains(".svc:")
                        || w.service().is_some_and(|s| {
                            message.contains(&format!("https://{}.{}.svc:", s.name, s.namespace))
                        })
                })
                .map(|(f, _, _, call)| (f.namespace, call))
                .collect();
            if calls.is_empty() {
                continue;
            }
            let call = calls[0].1;
            let kind = w.config_kind.kind();
            let service = w.service();
            let mut evidence = vec![format!(
                "{kind} {} webhook {:?} (failurePolicy {}) calls {}",
                w.config_name,
                w.name,
                w.failure_policy,
                match &service {
                    Some(s) => format!("Service {s}"),
                    None => format!("URL {}", w.client_config.url.as_deref().unwrap_or("?")),
                }
            )];
            if let Some(s) = &service {
                let j = crate::doctor::backend::judge(self.snapshot.service_lookup(s));
                evidence.extend(j.evidence);
                if j.state == BackendState::Serving {
                    evidence.push(
                        "its Service has a ready endpoint: the backend is there, so it is not gone"
                            .into(),
                    );
                }
            }
            let mut blocks: Vec<String> = Vec::new();
            for (ns, c) in &calls {
                evidence.push(format!(
                    "namespace {ns}'s {NS_CONTENT_FAILURE} condition quotes the apiserver: failed calling webhook {:?}: ... {}",
                    w.name, c.quote
                ));
                blocks.push((*ns).to_owned());
            }
            blocks.sort();
            blocks.dedup();
            evidence.extend(
                self.snapshot
                    .webhook_probes
                    .iter()
                    .filter(|p| {
                        p.webhook == w.name
                            && blocks
                                .iter()
                                .any(|ns| p.object.contains(&format!(" {ns}/")))
                    })
                    .map(|p| p.line()),
            );
            evidence.push(call.line());
            evidence.push(format!(
                "not failed open: that is for a backend proven gone, and this one would let through what it exists to check; {}",
                call.advice()
            ));
            let verdict = verdict_name(&call.verdict);
            findings.push(Finding {
                kind: FindingKind::WebhookBackendFailing,
                subject: ObjectRef {
                    api_version: "admissionregistration.k8s.io/v1".into(),
                    kind: kind.into(),
                    namespace: None,
                    name: w.config_name.to_owned(),
                    uid: w.config_uid.map(str::to_owned),
                },
                summary: format!(
                    "webhook {:?} in {kind} {} fails closed and its backend is {verdict} ({}); it blocks deletion of namespace(s) {}",
                    w.name,
                    w.config_name,
                    call.quote,
                    blocks.join(", ")
                ),
                evidence,
                detail: FindingDetail::FailingWebhook {
                    configuration: w.config_kind,
                    configuration_name: w.config_name.to_owned(),
                    webhook: w.name.to_owned(),
                    service,
                    verdict: verdict.to_owned(),
                    quote: call.quote.clone(),
                    timeout: call.timeout.clone(),
                    blocks_namespaces: blocks,
                },
            });
        }
    }
}

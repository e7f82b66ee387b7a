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
use k8s_openapi::api::core::v1::Namespace;

use crate::doctor::backend::{
    BackendState, CallFailure, CallVerdict, Misconfiguration, NOT_SERVING, classify, judge,
};
use crate::doctor::conditions::{NS_CONTENT_FAILURE, failing_namespace_condition};
use crate::doctor::model::{Finding, FindingDetail, ServiceKey, WebhookId, WebhookView};
use crate::doctor::webhook::{may_have_failed, webhooks};
use crate::text::quoted;

/// Drops the not-serving webhook findings that stand in nothing's way
/// (no namespace names them, no release is rejected by them): a product
/// being rolled out is not news unless it holds something.
pub(super) fn drop_idle_not_serving(findings: &mut Vec<Finding>) {
    findings.retain(|f| {
        !matches!(&f.detail, FindingDetail::WebhookBackendFailing { verdict, blocks_namespaces, rejects, .. }
            if verdict == NOT_SERVING && blocks_namespaces.is_empty() && rejects.is_empty())
    });
}

fn verdict_name(v: &CallVerdict) -> &'static str {
    match v {
        CallVerdict::Unreachable => "unreachable",
        CallVerdict::Slow => "slow",
        CallVerdict::Misconfigured(Misconfiguration::Tls) => "misconfigured: TLS",
        CallVerdict::Misconfigured(Misconfiguration::ServerError) => "misconfigured: HTTP error",
        CallVerdict::Misconfigured(Misconfiguration::BadReview) => "misconfigured: bad review",
    }
}

/// A Terminating namespace whose content deletes fail on a webhook call
/// that reached a backend (slow or misconfigured, not unreachable).
struct FailingNamespace<'a> {
    failure: &'a ContentFailure<'a>,
    namespace: &'a Namespace,
    /// The content-failure condition's message, the apiserver's words.
    message: &'a str,
    call: CallFailure,
}

/// The failing namespaces' calls that can be this webhook's: the error
/// names the webhook, not its configuration, and two configurations may
/// hold webhooks of one name. It is this one only if it could have been
/// called for that namespace (its namespaceSelector) and, where the error
/// quotes the URL, through its own Service.
fn calls_of<'f>(
    w: &WebhookView<'_>,
    failing: &'f [FailingNamespace<'f>],
) -> Vec<(&'f str, &'f CallFailure)> {
    failing
        .iter()
        .filter(|f| may_have_failed(w, f.namespace, f.message))
        .map(|f| (f.failure.namespace, &f.call))
        .collect()
}

impl Diagnosis<'_> {
    /// WebhookBackendFailing findings, for fail-closed webhooks that are
    /// not dead (`dead`) and that a Terminating namespace's content failure
    /// names with a slow or misconfigured call.
    pub(super) fn failing_webhooks(
        &self,
        failures: &[ContentFailure<'_>],
        dead: &BTreeSet<WebhookId>,
        findings: &mut Vec<Finding>,
    ) {
        let failing = self.failing_namespaces(failures);
        for w in webhooks(self.snapshot) {
            if w.failure_policy != "Fail" || dead.contains(&w.id()) {
                continue;
            }
            let calls = calls_of(&w, &failing);
            if !calls.is_empty() && !self.answers_now(&w, &calls) {
                findings.push(self.failing_webhook_finding(&w, &calls));
            }
        }
    }

    /// Fail-closed webhooks whose backend is installed but does not serve:
    /// the Service is there and selects pods, none of its endpoints is
    /// ready at any read, and the lookup shows why (its pods Pending,
    /// crash-looping, unschedulable, or none to select). Every call fails
    /// at once ("no endpoints available for service"), so every write it
    /// matches is rejected; it is not proven gone (it is coming back, or
    /// may be), so it is never failed open. It is a finding only when it
    /// stands in the way: a Terminating namespace's content failure names
    /// it, or [`crate::doctor::rejected`] finds a release it rejects
    /// (findings that do neither are dropped after linking, see
    /// [`drop_idle_not_serving`]).
    pub(super) fn not_serving_webhooks(
        &self,
        failures: &[ContentFailure<'_>],
        dead: &BTreeSet<WebhookId>,
        findings: &mut Vec<Finding>,
    ) {
        for w in webhooks(self.snapshot) {
            if w.failure_policy != "Fail" || dead.contains(&w.id()) {
                continue;
            }
            let already = findings.iter().any(|f| {
                matches!(&f.detail, FindingDetail::WebhookBackendFailing { configuration_name, webhook, .. }
                    if configuration_name == w.config_name && webhook == w.name)
            });
            let Some(service) = w.service() else { continue };
            let lookup = self.snapshot.service_lookup(&service);
            let Some(cause) = crate::doctor::backend::not_serving_cause(lookup) else {
                continue;
            };
            let judged = judge(lookup);
            if already
                || lookup.is_none_or(|l| l.reads.iter().any(|r| r.ready > 0))
                || judged.state != BackendState::Unknown
            {
                continue;
            }
            let blocks = super::namespace::namespaces_blaming(failures, &w);
            let kind = w.config_kind.kind();
            let quote = format!("no endpoints available for service \"{}\"", service.name);
            let mut evidence = vec![format!(
                "{kind} {} webhook {} (failurePolicy {}) calls Service {service}",
                w.config_name,
                quoted(w.name),
                w.failure_policy
            )];
            evidence.extend(judged.evidence);
            evidence.push(format!("its backend does not serve: {cause}"));
            evidence.push(format!(
                "with no ready endpoint the apiserver fails every call at once ({quote}), so every write it matches is rejected: {}",
                w.rules_line()
            ));
            evidence.push(format!(
                "not failed open: its backend is installed, not proven gone, and would check these writes once it serves; exists to check; repair what keeps its backend from serving ({cause})"
            ));
            findings.push(Finding {
                subject: w.config_ref(),
                summary: format!(
                    "webhook {} in {kind} {} fails closed and its backend does not serve ({cause}){}",
                    quoted(w.name),
                    w.config_name,
                    if blocks.is_empty() {
                        String::new()
                    } else {
                        format!("; it blocks deletion of namespace(s) {}", blocks.join(", "))
                    }
                ),
                evidence,
                detail: FindingDetail::WebhookBackendFailing {
                    configuration: w.config_kind,
                    configuration_name: w.config_name.to_owned(),
                    webhook: w.name.to_owned(),
                    service: Some(service),
                    verdict: NOT_SERVING.to_owned(),
                    quote,
                    timeout: None,
                    blocks_namespaces: blocks,
                    rejects: Vec::new(),
                },
            });
        }
    }

    /// Whether the doctor's own dry-runs through this webhook, in the
    /// namespaces whose condition says it fails, were all admitted: the
    /// backend answers now, and the condition is older than its repair
    /// (the namespace controller rewrites it only at its next pass). Then
    /// nothing waits on it any more.
    fn answers_now(&self, w: &WebhookView<'_>, calls: &[(&str, &CallFailure)]) -> bool {
        let mut probes = self
            .snapshot
            .webhook_probes
            .iter()
            .filter(|p| {
                p.webhook == w.name
                    && calls
                        .iter()
                        .any(|(ns, _)| p.object.contains(&format!(" {ns}/")))
            })
            .peekable();
        probes.peek().is_some() && probes.all(|p| p.error.is_none())
    }

    /// The content failures whose condition quotes a webhook call that
    /// reached its backend.
    fn failing_namespaces<'a>(
        &'a self,
        failures: &'a [ContentFailure<'a>],
    ) -> Vec<FailingNamespace<'a>> {
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
            failing.push(FailingNamespace {
                failure: f,
                namespace: ns,
                message,
                call,
            });
        }
        failing
    }

    /// The finding for webhook `w`, blocked by `calls` (not empty; the
    /// first one's verdict and advice speak for all).
    fn failing_webhook_finding(
        &self,
        w: &WebhookView<'_>,
        calls: &[(&str, &CallFailure)],
    ) -> Finding {
        let call = calls[0].1;
        let kind = w.config_kind.kind();
        let service = w.service();
        let mut blocks: Vec<String> = calls.iter().map(|(ns, _)| (*ns).to_owned()).collect();
        blocks.sort();
        blocks.dedup();
        let evidence = self.failing_webhook_evidence(w, service.as_ref(), calls, &blocks);
        let verdict = verdict_name(&call.verdict);
        Finding {
            subject: w.config_ref(),
            summary: format!(
                "webhook {} in {kind} {} fails closed and its backend is {verdict} ({}); it blocks deletion of namespace(s) {}",
                quoted(w.name),
                w.config_name,
                call.quote,
                blocks.join(", ")
            ),
            evidence,
            detail: FindingDetail::WebhookBackendFailing {
                configuration: w.config_kind,
                configuration_name: w.config_name.to_owned(),
                webhook: w.name.to_owned(),
                service,
                verdict: verdict.to_owned(),
                quote: call.quote.clone(),
                timeout: call.timeout.clone(),
                blocks_namespaces: blocks,
                rejects: Vec::new(),
            },
        }
    }

    /// What shows the backend is there but failing: what the webhook calls,
    /// its Service's endpoints, each namespace's quoted error, the probes
    /// made for it, and why it is not failed open.
    fn failing_webhook_evidence(
        &self,
        w: &WebhookView<'_>,
        service: Option<&ServiceKey>,
        calls: &[(&str, &CallFailure)],
        blocks: &[String],
    ) -> Vec<String> {
        let call = calls[0].1;
        let mut evidence = vec![format!(
            "{} {} webhook {} (failurePolicy {}) calls {}",
            w.config_kind.kind(),
            w.config_name,
            quoted(w.name),
            w.failure_policy,
            match service {
                Some(s) => format!("Service {s}"),
                None => format!("URL {}", w.client_config.url.as_deref().unwrap_or("?")),
            }
        )];
        if let Some(s) = service {
            let j = judge(self.snapshot.service_lookup(s));
            evidence.extend(j.evidence);
            if j.state == BackendState::Serving {
                evidence.push(
                    "its Service has a ready endpoint: the backend is there, so it is not gone"
                        .into(),
                );
            }
        }
        for (ns, c) in calls {
            evidence.push(format!(
                "namespace {ns}'s {NS_CONTENT_FAILURE} condition quotes the apiserver: failed calling webhook {}: ... {}",
                quoted(w.name), c.quote
            ));
        }
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
        evidence
    }
}

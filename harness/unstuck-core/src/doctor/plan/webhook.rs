//! Admission webhook remedies: making a dead webhook fail open
//! ([`SetWebhookFailurePolicy`]), only when its backend is proven gone and
//! it keeps something stuck.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Action, FORCE_WEBHOOK_FAIL_OPEN, PlannedStep, refuse, wait};
use crate::doctor::model::{
    DeadWebhookFacts, Finding, FindingDetail, PodStuckHint, Snapshot, WebhookConfigKind,
    WebhookView,
};
use crate::doctor::webhook::webhooks;
use crate::text::quoted;

/// Set one webhook's `failurePolicy` from `Fail` to `Ignore`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetWebhookFailurePolicy {
    /// Where the webhook is configured.
    pub configuration: WebhookConfigKind,
    /// The configuration's name.
    pub configuration_name: String,
    /// The configuration's UID (the patch tests it).
    pub uid: String,
    /// The configuration's resourceVersion as read (the patch tests it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// The webhook's position in `webhooks` (the patch tests its name).
    pub index: usize,
    /// The webhook's name.
    pub webhook: String,
    /// Why its backend counts as gone.
    pub reason: String,
}

impl SetWebhookFailurePolicy {
    /// `/apis/admissionregistration.k8s.io/v1/<kind>s/<name>`.
    pub fn api_path(&self) -> String {
        format!(
            "/apis/admissionregistration.k8s.io/v1/{}/{}",
            self.configuration.resource(),
            self.configuration_name
        )
    }

    /// The RFC 6902 patch: `test` the UID, the resourceVersion read (when
    /// known), the webhook's name at its index and that it still fails
    /// closed, then `replace` the policy. If the configuration changed
    /// since the read, nothing is written.
    pub fn json_patch(&self) -> Value {
        let at = format!("/webhooks/{}", self.index);
        let mut ops = vec![json!({"op": "test", "path": "/metadata/uid", "value": self.uid})];
        if let Some(rv) = &self.resource_version {
            ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
        }
        ops.push(json!({"op": "test", "path": format!("{at}/name"), "value": self.webhook}));
        ops.push(json!({"op": "test", "path": format!("{at}/failurePolicy"), "value": "Fail"}));
        ops.push(
            json!({"op": "replace", "path": format!("{at}/failurePolicy"), "value": "Ignore"}),
        );
        Value::Array(ops)
    }
}

pub(super) fn webhook_fail_open(
    i: usize,
    facts: &DeadWebhookFacts,
    all: &[Finding],
    snapshot: &Snapshot,
) -> PlannedStep {
    let DeadWebhookFacts {
        configuration,
        configuration_name,
        index,
        webhook,
        service,
        backend,
        blocks_namespaces,
        rejects,
        ..
    } = facts;
    let w = match still_dead(
        i,
        snapshot,
        *configuration,
        configuration_name,
        *index,
        webhook,
        service,
    ) {
        Ok(w) => w,
        Err(refused) => return *refused,
    };
    // A dead webhook is changed only for what it keeps stuck: a namespace
    // whose content deletes it rejects, a write that would release a stuck
    // object, or a stuck pod's final DELETE. One that blocks nothing stuck
    // is left as it is, whatever else it would reject.
    let blocks_pod_delete = blocks_a_pod_delete(&w, all, snapshot);
    if blocks_namespaces.is_empty() && rejects.is_empty() && !blocks_pod_delete {
        return wait(
            i,
            format!(
                "webhook {webhook} keeps nothing stuck; it is left as it is",
                webhook = quoted(webhook)
            ),
            format!(
                "webhook {webhook} fails closed with its Service {service} gone ({backend}), so it rejects everything it matches ({}), but no stuck object waits on it: restore its backend (or remove the configuration if its product is gone); the doctor changes a webhook only for what it keeps stuck",
                w.rules_line(),
                webhook = quoted(webhook)
            ),
        );
    }
    let Some(uid) = w.config_uid else {
        return refuse(
            i,
            format!(
                "{configuration_name} has no uid in the snapshot; a patch could not be bound to it"
            ),
        );
    };
    let kind = configuration.kind();
    PlannedStep {
        finding_index: i,
        action: Action::SetWebhookFailurePolicy(SetWebhookFailurePolicy {
            configuration: *configuration,
            configuration_name: configuration_name.clone(),
            uid: uid.to_owned(),
            resource_version: w.config_resource_version.map(str::to_owned),
            index: *index,
            webhook: webhook.clone(),
            reason: format!("{backend}: Service {service}"),
        }),
        rationale: format!(
            "webhook {webhook} in {kind} {configuration_name} rejects what it matches because its Service {service} is gone ({backend}){}; restoring the backend is the gentler fix. Failing open keeps the registration (and any other webhook in it) and is undone by re-applying the saved manifest; deleting the configuration is never planned",
            keeps_stuck(blocks_namespaces, rejects, blocks_pod_delete),
            webhook = quoted(webhook)
        ),
        force_level: FORCE_WEBHOOK_FAIL_OPEN,
    }
}

/// Whether the webhook rejects the final DELETE of a pod stuck for it.
fn blocks_a_pod_delete(w: &WebhookView<'_>, all: &[Finding], snapshot: &Snapshot) -> bool {
    all.iter().any(|g| {
        matches!(
            g.detail,
            FindingDetail::PodStuckTerminating {
                hint: PodStuckHint::DeleteRejected,
                ..
            }
        ) && crate::doctor::admission::pod_of(snapshot, &g.subject)
            .is_some_and(|pod| w.matches_final_delete_of(pod, snapshot))
    })
}

/// A dead webhook failed open only for writes this plan refuses anyway
/// would open a policy for nothing: when it blocks no namespace and no
/// pod's final DELETE, and every object whose release it rejects has only
/// refusals planned (not a wait, which a later round may turn into a
/// write), its step becomes a refusal that says so.
pub(super) fn drop_purposeless_fail_opens(
    findings: &[Finding],
    steps: &mut [PlannedStep],
    snapshot: &Snapshot,
) {
    let refused_only = |subject: &crate::doctor::model::ObjectRef| {
        let mut of_subject = steps
            .iter()
            .filter(|s| findings[s.finding_index].subject == *subject)
            .peekable();
        of_subject.peek().is_some() && of_subject.all(|s| matches!(s.action, Action::Refuse { .. }))
    };
    let mut purposeless = Vec::new();
    for (at, step) in steps.iter().enumerate() {
        let Action::SetWebhookFailurePolicy(set) = &step.action else {
            continue;
        };
        let FindingDetail::DeadWebhook(DeadWebhookFacts {
            blocks_namespaces,
            rejects,
            ..
        }) = &findings[step.finding_index].detail
        else {
            continue;
        };
        if !blocks_namespaces.is_empty() || rejects.is_empty() {
            continue;
        }
        let pod_delete = webhooks(snapshot).iter().any(|w| {
            w.config_kind == set.configuration
                && w.config_name == set.configuration_name
                && w.index == set.index
                && blocks_a_pod_delete(w, findings, snapshot)
        });
        if pod_delete || !rejects.iter().all(|r| refused_only(&r.subject)) {
            continue;
        }
        let subjects: Vec<String> = rejects.iter().map(|r| r.subject.to_string()).collect();
        purposeless.push((
            at,
            format!(
                "webhook {} would be failed open only for writes this plan refuses ({}): opening a policy for nothing is not done; settle those first (see their refusals), then run again",
                quoted(&set.webhook),
                subjects.join(", ")
            ),
        ));
    }
    for (at, why) in purposeless {
        let i = steps[at].finding_index;
        steps[at] = refuse(i, why);
    }
}

/// Re-argues a dead webhook from the snapshot: it is still there, at the
/// same index, failing closed, and its Service lookup still proves it
/// dead. Otherwise the step that refuses it.
fn still_dead<'a>(
    i: usize,
    snapshot: &'a Snapshot,
    configuration: WebhookConfigKind,
    configuration_name: &str,
    index: usize,
    webhook: &str,
    service: &crate::doctor::model::ServiceKey,
) -> Result<WebhookView<'a>, Box<PlannedStep>> {
    let Some(w) = webhooks(snapshot).into_iter().find(|w| {
        w.config_kind == configuration
            && w.config_name == configuration_name
            && w.index == index
            && w.name == webhook
    }) else {
        return Err(Box::new(refuse(
            i,
            format!(
                "webhook {webhook} is not in {configuration_name} any more; nothing to change",
                webhook = quoted(webhook)
            ),
        )));
    };
    if w.failure_policy != "Fail" {
        return Err(Box::new(refuse(
            i,
            format!(
                "webhook {webhook} already has failurePolicy {}",
                w.failure_policy,
                webhook = quoted(webhook)
            ),
        )));
    }
    let proven = crate::doctor::backend::judge(snapshot.service_lookup(service)).is_gone();
    if !proven {
        return Err(Box::new(refuse(
            i,
            format!(
                "the backend of webhook {webhook} (Service {service}) is not proven gone",
                webhook = quoted(webhook)
            ),
        )));
    }
    Ok(w)
}

/// What a dead webhook keeps stuck, for the fail-open's rationale.
fn keeps_stuck(
    blocks_namespaces: &[String],
    rejects: &[crate::doctor::model::RejectedWrite],
    blocks_pod_delete: bool,
) -> String {
    let mut parts = Vec::new();
    if !blocks_namespaces.is_empty() {
        parts.push(format!(
            "blocks deletion of namespace(s) {}",
            blocks_namespaces.join(", ")
        ));
    }
    for r in rejects {
        parts.push(format!(
            "rejects {} {} of {} ({})",
            r.operation, r.resource, r.subject, r.purpose
        ));
    }
    if blocks_pod_delete {
        parts.push("rejects a stuck pod's final DELETE".into());
    }
    format!(" and {}", parts.join("; "))
}

/// WebhookBackendFailing: advice only. Its backend is there (slow or
/// answering wrongly), so failing it open is not the remedy: that would
/// switch off a policy engine that is down for a repair, and for a TLS
/// mismatch trusting what it serves now would be trusting whoever serves
/// it. The finding's evidence says what to repair.
pub(super) fn backend_failing(i: usize, f: &Finding) -> PlannedStep {
    let (webhook, verdict, quote) = match &f.detail {
        FindingDetail::WebhookBackendFailing {
            webhook,
            verdict,
            quote,
            ..
        } => (webhook.as_str(), verdict.as_str(), quote.as_str()),
        _ => ("?", "failing", ""),
    };
    let advice = f
        .evidence
        .iter()
        .find_map(|e| e.split_once("exists to check; ").map(|(_, advice)| advice))
        .unwrap_or("repair its backend");
    refuse(
        i,
        format!(
            "webhook {webhook} of {} is not dead: its backend is {verdict} ({quote}); it is left as it is: {advice}",
            f.subject,
            webhook = quoted(webhook)
        ),
    )
}

//! What later rounds of `--apply --yes` are expected to do once a dead
//! webhook this plan fails open lets the namespace controller's DELETEs
//! through: each object in a namespace the webhook blocks whose DELETE it
//! rejects now, and that carries finalizers, hangs on them next. The dry
//! run shows those objects and each key's owner as argued now, so a
//! person confirms the whole chain, not its first link.

use serde::{Deserialize, Serialize};

use super::{Action, PlannedStep};
use crate::doctor::admission::{NO_LABELS, Write, matches};
use crate::doctor::model::{
    DeadWebhookFacts, Finding, FindingDetail, ObjectRecord, ObjectRef, OwnerVerdict, Snapshot,
    WebhookView,
};
use crate::doctor::owner::{OwnerCache, OwnerQuery};
use crate::doctor::webhook::webhooks;

/// An object a later round is expected to meet, Terminating and held by
/// its finalizers, once a webhook's fail-open lets its DELETE through.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpectedStep {
    /// The dead webhook's finding, whose fail-open comes first.
    pub webhook_finding: usize,
    /// The webhook's name.
    pub webhook: String,
    /// The object whose DELETE the webhook rejects now.
    pub object: ObjectRef,
    /// Each finalizer key, its owner as argued now and what that round
    /// does with it.
    pub keys: Vec<ExpectedKey>,
}

/// One finalizer key of an [`ExpectedStep`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpectedKey {
    /// The key.
    pub finalizer: String,
    /// `Dead`, `Alive` or `Unknown`, as argued on this snapshot.
    pub owner: String,
    /// What the round that meets it does.
    pub then: String,
}

/// The objects each fail-open step of `steps` lets the namespace
/// controller delete, that will hang on their finalizers.
pub(super) fn expected_after_fail_open(
    findings: &[Finding],
    steps: &[PlannedStep],
    snapshot: &Snapshot,
    owners: &OwnerCache,
    assume_dead: &[String],
) -> Vec<ExpectedStep> {
    let views = webhooks(snapshot);
    let mut out = Vec::new();
    for step in steps {
        let Action::SetWebhookFailurePolicy(set) = &step.action else {
            continue;
        };
        let FindingDetail::DeadWebhook(DeadWebhookFacts {
            blocks_namespaces, ..
        }) = &findings[step.finding_index].detail
        else {
            continue;
        };
        let Some(view) = views.iter().find(|w| {
            w.config_kind == set.configuration
                && w.config_name == set.configuration_name
                && w.index == set.index
        }) else {
            continue;
        };
        for record in snapshot.namespace_content.iter().filter(|r| {
            r.metadata.deletion_timestamp.is_none()
                && r.metadata
                    .namespace
                    .as_ref()
                    .is_some_and(|ns| blocks_namespaces.contains(ns))
                && !r
                    .metadata
                    .finalizers
                    .as_deref()
                    .unwrap_or_default()
                    .is_empty()
        }) {
            if !rejects_delete_of(view, record, snapshot) {
                continue;
            }
            out.push(ExpectedStep {
                webhook_finding: step.finding_index,
                webhook: set.webhook.clone(),
                object: ObjectRef {
                    api_version: record.api_version.clone(),
                    kind: record.kind.clone(),
                    namespace: record.metadata.namespace.clone(),
                    name: record.metadata.name.clone().unwrap_or_default(),
                    uid: record.metadata.uid.clone(),
                },
                keys: keys_of(record, owners, assume_dead),
            });
        }
    }
    out
}

/// Whether the namespace controller's DELETE of `record` reaches the
/// webhook (which, failing closed with its backend gone, rejects it).
fn rejects_delete_of(view: &WebhookView<'_>, record: &ObjectRecord, snapshot: &Snapshot) -> bool {
    let write = Write {
        operation: "DELETE",
        api_version: &record.api_version,
        resource: &record.resource,
        subresource: "",
        namespace: record.metadata.namespace.as_deref(),
        name: record.metadata.name.as_deref().unwrap_or_default(),
        labels: Some(record.metadata.labels.as_ref().unwrap_or(&NO_LABELS)),
    };
    matches(view, &write, snapshot).reaches()
}

fn keys_of(record: &ObjectRecord, owners: &OwnerCache, assume_dead: &[String]) -> Vec<ExpectedKey> {
    record
        .metadata
        .finalizers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|key| {
            let v = owners.verdict(&OwnerQuery {
                finalizer: key,
                kind: &record.kind,
                record: Some(record),
                assume_dead,
            });
            let then = match &v.verdict {
                OwnerVerdict::Dead { .. } if v.assumed_dead => format!(
                    "removed (its owner assumed dead: --assume-dead {key} was given), after a re-check on a fresh read"
                ),
                OwnerVerdict::Dead { .. } => {
                    "removed (its owner is dead), after a re-check on a fresh read".to_string()
                }
                OwnerVerdict::Alive { .. } => {
                    "left to its owner, which is alive and finishes it".to_string()
                }
                OwnerVerdict::Unknown { evidence } => format!(
                    "refused unless you confirm its owner is gone and add --assume-dead {key} ({})",
                    evidence
                        .first()
                        .map(String::as_str)
                        .unwrap_or("no source decides")
                ),
            };
            ExpectedKey {
                finalizer: key.clone(),
                owner: v.verdict.label().to_string(),
                then,
            }
        })
        .collect()
}

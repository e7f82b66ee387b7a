//! Timing a failing webhook with the apiserver itself: a server-side
//! dry-run (`dryRun=All`) DELETE of an object in a namespace whose
//! deletes the webhook fails, made by the collector. The request goes
//! through admission as the namespace controller's does, writes nothing,
//! and its answer and duration are evidence: a hang costs the call's
//! whole timeout, a misconfigured backend fails at once.
//!
//! Here the choice of what to time (pure); the request is the collector's.

use serde::{Deserialize, Serialize};

use super::{CallVerdict, classify};
use crate::doctor::admission::selector_matches;
use crate::doctor::conditions::{NS_CONTENT_FAILURE, failing_namespace_condition};
use crate::doctor::snapshot::{ObjectRecord, Snapshot};
use crate::doctor::webhook::{failed_webhooks, webhooks};

/// At most this many objects are tried per webhook (each may cost the
/// webhook's timeout).
pub const MAX_TRIES: usize = 2;

/// One dry-run the collector made.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookProbe {
    /// The webhook whose failing calls were timed.
    pub webhook: String,
    /// `Kind namespace/name` of the object dry-run deleted.
    pub object: String,
    /// From the request to the apiserver's answer.
    pub elapsed_ms: u64,
    /// The apiserver's error; `None` when the dry-run was admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl WebhookProbe {
    /// One evidence line.
    pub fn line(&self) -> String {
        let secs = self.elapsed_ms as f64 / 1000.0;
        match &self.error {
            Some(e) => format!(
                "the doctor's server-side dry-run DELETE (dryRun=All) of {} was rejected after {secs:.2} s (measured): {e}",
                self.object
            ),
            None => format!(
                "the doctor's server-side dry-run DELETE (dryRun=All) of {} was admitted after {secs:.2} s (measured): the backend answered this time",
                self.object
            ),
        }
    }
}

/// What to dry-run delete: per Terminating namespace whose content
/// failure names a fail-closed webhook with a slow or misconfigured call,
/// up to [`MAX_TRIES`] objects of that namespace its objectSelector takes
/// (not being deleted already: the namespace controller's failed deletes
/// leave them so).
pub fn probe_targets(snapshot: &Snapshot) -> Vec<(String, &ObjectRecord)> {
    let mut out = Vec::new();
    for ns in snapshot
        .namespaces
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_some())
    {
        let Some(name) = ns.metadata.name.as_deref() else {
            continue;
        };
        let Some(message) =
            failing_namespace_condition(ns, NS_CONTENT_FAILURE).and_then(|c| c.message.as_deref())
        else {
            continue;
        };
        if classify(message).is_none_or(|c| c.verdict == CallVerdict::Unreachable) {
            continue;
        }
        // Per namespace: configurations may share a webhook's name.
        for hook in failed_webhooks(message) {
            let Some(w) = webhooks(snapshot)
                .into_iter()
                .find(|w| w.name == hook && w.failure_policy == "Fail")
            else {
                continue;
            };
            let candidates = snapshot
                .namespace_content
                .iter()
                .filter(|r| r.namespace() == Some(name) && r.metadata.deletion_timestamp.is_none())
                .filter(|r| {
                    w.object_selector.is_none_or(|sel| {
                        selector_matches(sel, &r.metadata.labels.clone().unwrap_or_default())
                    })
                })
                .take(MAX_TRIES);
            for r in candidates {
                out.push((hook.clone(), r));
            }
        }
    }
    out
}

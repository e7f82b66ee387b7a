//! Timing a failing webhook with the apiserver itself: a server-side
//! dry-run (`dryRun=All`) DELETE of an object in a namespace whose
//! deletes the webhook fails, made by the collector. The request goes
//! through admission as the namespace controller's does, writes nothing,
//! and its answer and duration are evidence: a hang costs the call's
//! whole timeout, a misconfigured backend fails at once.
//!
//! Here the choice of what to time (pure); the request is the collector's.

use super::{CallVerdict, classify};
use crate::doctor::admission::selector_matches;
use crate::doctor::conditions::{NS_CONTENT_FAILURE, failing_namespace_condition};
use crate::doctor::model::{ObjectRecord, Snapshot};
use crate::doctor::webhook::{failed_webhooks, may_have_failed, webhooks};

/// At most this many objects are tried per webhook (each may cost the
/// webhook's timeout).
pub const MAX_TRIES: usize = 2;

/// What to dry-run delete: per Terminating namespace whose content
/// failure names a fail-closed webhook with a slow or misconfigured call,
/// up to [`MAX_TRIES`] objects of that namespace its objectSelector takes:
/// first those not being deleted (the namespace controller's failed
/// deletes leave them so), then those being deleted (a DELETE of one goes
/// through admission all the same).
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
            let Some(w) = webhooks(snapshot).into_iter().find(|w| {
                w.name == hook && w.failure_policy == "Fail" && may_have_failed(w, ns, message)
            }) else {
                continue;
            };
            let mut candidates: Vec<&ObjectRecord> = snapshot
                .namespace_content
                .iter()
                .filter(|r| r.namespace() == Some(name))
                .filter(|r| {
                    w.object_selector.is_none_or(|sel| {
                        selector_matches(sel, &r.metadata.labels.clone().unwrap_or_default())
                    })
                })
                .collect();
            candidates.sort_by_key(|r| r.metadata.deletion_timestamp.is_some());
            for r in candidates.into_iter().take(MAX_TRIES) {
                out.push((hook.clone(), r));
            }
        }
    }
    out
}

/// What to time for aggregated APIs: each APIService served by a Service
/// whose condition says Available=False while its Service has ready
/// endpoints (a backend that is there but fails), as `(name,
/// group/version)`.
pub fn api_service_probe_targets(snapshot: &Snapshot) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for api in &snapshot.api_services {
        let Some(spec) = api.spec.as_ref() else {
            continue;
        };
        let (Some(group), Some(version)) = (spec.group.as_deref(), spec.version.as_deref()) else {
            continue;
        };
        if spec.service.is_none() || group.is_empty() {
            continue;
        }
        let Some(available) = api
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Available"))
            .filter(|c| c.status == "False")
        else {
            continue;
        };
        if matches!(
            crate::doctor::apiservice::backend(api, available, &snapshot.api_service_backends),
            crate::doctor::apiservice::Backend::Serving(_)
        ) {
            out.push((
                api.metadata.name.clone().unwrap_or_default(),
                format!("{group}/{version}"),
            ));
        }
    }
    out
}

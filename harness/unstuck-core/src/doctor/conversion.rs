//! CRD conversion webhooks: a CustomResourceDefinition with
//! `spec.conversion.strategy: Webhook` whose Service is gone.
//!
//! kube-apiserver (apiextensions-apiserver) calls the webhook whenever an
//! object must be read or written in another version than the one it is
//! stored in. An object keeps the version it was written in until it is
//! written again, so after an upgrade moved the storage version, objects
//! written before it are still stored in the old one
//! (`status.storedVersions` lists both), and every read in the new,
//! preferred version needs the webhook. The namespace controller lists and
//! deletes in the preferred version, so a namespace holding such objects
//! stays Terminating. Recorded on v1.34.4 (scenario
//! `crd-conversion-webhook-service-gone`, OSM's MultiClusterService with
//! its `osm-system/osm-bootstrap` Service gone):
//!
//! - the namespace: `NamespaceDeletionContentFailure=True
//!   (ContentDeletionFailed)`: `Failed to delete all resource types, 1
//!   remaining: conversion webhook for config.openservicemesh.io/v1alpha1,
//!   Kind=MultiClusterService failed: Post
//!   "https://osm-bootstrap.osm-system.svc:9443/convert/multiclusterservice?timeout=30s":
//!   service "osm-bootstrap" not found` (the version is the one the object
//!   is stored in, not the one asked for);
//! - a paged list of the type (the collector's): the same text, status 500;
//! - an unpaged list, served by the watch cache, which cannot fill itself:
//!   `storage is (re)initializing: failed to list
//!   config.openservicemesh.io/v1alpha2, Kind=MultiClusterService:
//!   conversion webhook for config.openservicemesh.io/v1alpha1,
//!   Kind=MultiClusterService failed: ...` (429);
//! - another namespace, holding no such object, deleted meanwhile: the
//!   same condition with the cache's text (`Failed to delete all resource
//!   types, 1 remaining: storage is (re)initializing: ...`), or in another
//!   run no condition at all, kube-controller-manager's namespace worker
//!   busy on it for minutes; it finished seconds after the conversion was
//!   fixed.
//!
//! v1.37.2 words the namespace condition differently, the same text at
//! its end: `Failed to delete all resource types, 1 remaining: failed to
//! read one or more multiclusterservices.config.openservicemesh.io from
//! the storage: StorageError: corrupt object, Code: 7, Key:
//! /registry/config.openservicemesh.io/multiclusterservices/east/bookstore,
//! ResourceVersion: 0, AdditionalErrorMsg: object not decodable
//! revision=313: conversion webhook for config.openservicemesh.io/v1alpha1,
//! Kind=MultiClusterService failed: ...`.
//!
//! Restoring the backend is the gentle fix. Strategy `None` runs the
//! `nopConverter` (`pkg/apiserver/conversion/nop_converter.go`), which only
//! rewrites `apiVersion`; the object is then pruned and defaulted with the
//! schema of the version it is read in (`schemaCoercingConverter`,
//! `unstructuredDefaulter` in `pkg/apiserver/customresource_handler.go`).
//! So `None` loses nothing exactly when every version has the same schema
//! and every stored version is one of them: [`strategy_none_proof`].

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::backend::{BackendState, judge};
use super::conditions::{NS_CONTENT_FAILURE, NS_DISCOVERY_FAILURE, failing_namespace_condition};
use super::model::{
    ConversionWebhookFacts, Finding, FindingDetail, ObjectRef, ServiceKey, Snapshot,
    split_api_version,
};

mod proof;
pub use proof::{NoneProof, stored_versions, strategy_none_proof};

/// `spec.conversion.strategy` of a CRD converted by a webhook.
pub const STRATEGY_WEBHOOK: &str = "Webhook";

/// Whether `crd` converts through a webhook.
pub fn converts_through_webhook(crd: &CustomResourceDefinition) -> bool {
    crd.spec
        .conversion
        .as_ref()
        .is_some_and(|c| c.strategy == STRATEGY_WEBHOOK)
}

/// The Service a CRD's conversion webhook calls; `None` when it does not
/// convert through a webhook or calls a URL (never judged gone).
pub fn conversion_service(crd: &CustomResourceDefinition) -> Option<ServiceKey> {
    if !converts_through_webhook(crd) {
        return None;
    }
    let webhook = crd.spec.conversion.as_ref()?.webhook.as_ref()?;
    let s = webhook.client_config.as_ref()?.service.as_ref()?;
    Some(ServiceKey {
        namespace: s.namespace.clone(),
        name: s.name.clone(),
    })
}

/// The Services these CRDs' conversion webhooks call, each once, in order:
/// what a collector must look up.
pub fn services_called(crds: &[CustomResourceDefinition]) -> Vec<ServiceKey> {
    let set: BTreeSet<ServiceKey> = crds.iter().filter_map(conversion_service).collect();
    set.into_iter().collect()
}

/// One `conversion webhook for <group>/<version>, Kind=<Kind>` an
/// apiserver error quotes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FailedConversion {
    /// The API group.
    pub group: String,
    /// The version the object was converted from (where it is stored).
    pub version: String,
    /// The kind.
    pub kind: String,
}

const CONVERSION_FOR: &str = "conversion webhook for ";

/// Every conversion failure an apiserver error text quotes, each once, in
/// order of appearance.
pub fn failed_conversions(message: &str) -> Vec<FailedConversion> {
    let mut out: Vec<FailedConversion> = Vec::new();
    let mut rest = message;
    while let Some(at) = rest.find(CONVERSION_FOR) {
        rest = &rest[at + CONVERSION_FOR.len()..];
        let Some((gv, after)) = rest.split_once(", Kind=") else {
            break;
        };
        let kind: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if gv.contains(char::is_whitespace) || kind.is_empty() {
            continue;
        }
        let (group, version) = split_api_version(gv);
        let f = FailedConversion {
            group: group.to_owned(),
            version: version.to_owned(),
            kind,
        };
        if !out.contains(&f) {
            out.push(f);
        }
    }
    out
}

/// Whether `message` quotes the conversion of `kind` in `group` failing.
fn quotes(message: &str, group: &str, kind: &str) -> bool {
    failed_conversions(message)
        .iter()
        .any(|f| f.group == group && f.kind == kind)
}

/// `spec.versions` by name, the storage version first.
fn versions_line(crd: &CustomResourceDefinition) -> Vec<String> {
    let mut v: Vec<&_> = crd.spec.versions.iter().collect();
    v.sort_by_key(|v| !v.storage);
    v.into_iter().map(|v| v.name.clone()).collect()
}

/// DeadConversionWebhook findings: one per CRD whose conversion webhook's
/// Service the collector's lookup proves gone.
pub fn dead_conversion_webhooks(snapshot: &Snapshot) -> Vec<Finding> {
    snapshot
        .conversion_webhook_crds
        .iter()
        .filter_map(|crd| dead_conversion_webhook(snapshot, crd))
        .collect()
}

fn dead_conversion_webhook(snapshot: &Snapshot, crd: &CustomResourceDefinition) -> Option<Finding> {
    let service = conversion_service(crd)?;
    let j = judge(snapshot.service_lookup(&service));
    let BackendState::Gone(backend) = j.state else {
        return None;
    };
    let name = crd.metadata.name.clone().unwrap_or_default();
    let (group, kind) = (&crd.spec.group, &crd.spec.names.kind);
    let versions = versions_line(crd);
    let stored = stored_versions(crd);
    let mut evidence = vec![format!(
        "CustomResourceDefinition {name} (kind {kind}) converts its objects between versions through a webhook (spec.conversion.strategy Webhook) that calls Service {service}{}",
        webhook_target(crd)
    )];
    evidence.extend(j.evidence);
    evidence.push(format!(
        "spec.versions [{}] (storage {}), status.storedVersions [{}]: objects stored in one version and read in another go through the webhook, and every such read fails",
        versions.join(", "),
        versions.first().map_or("?", String::as_str),
        stored.join(", ")
    ));
    let blocks = blocked_namespaces(snapshot, group, kind);
    for (ns, condition) in &blocks {
        evidence.push(format!(
            "blocks deletion of namespace {ns}: its {condition} condition quotes conversion webhook for {group}/..., Kind={kind} failing"
        ));
    }
    let failed_lists: Vec<String> = snapshot
        .discovery_failures
        .iter()
        .filter(|f| split_api_version(&f.group_version).0 == group.as_str())
        .filter(|f| quotes(&f.message, group, kind))
        .map(|f| format!("{}: {}", f.group_version, f.message))
        .collect();
    for l in &failed_lists {
        evidence.push(format!("the collector's list failed on it too: {l}"));
    }
    if !failed_lists.is_empty() {
        evidence.extend(silent_namespaces(snapshot, &blocks).into_iter().map(|ns| format!(
            "namespace {ns} is Terminating with no condition from the namespace controller yet: every namespace deletion lists {kind} too, and while its lists fail cluster-wide a deletion can hang on them without a condition (seen on v1.34.4: such a namespace finished once the conversion worked again)"
        )));
    }
    let proof = strategy_none_proof(crd);
    evidence.extend(proof.evidence.iter().cloned());
    let blocks: Vec<String> = blocks.into_iter().map(|(ns, _)| ns).collect();
    Some(Finding {
        subject: ObjectRef {
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            namespace: None,
            name: name.clone(),
            uid: crd.metadata.uid.clone(),
        },
        summary: format!(
            "CRD {name} converts {kind} objects through a webhook whose Service {service} is gone ({backend}): every read of one in another version than it is stored in fails{}",
            if blocks.is_empty() {
                String::new()
            } else {
                format!("; it blocks deletion of namespace(s) {}", blocks.join(", "))
            }
        ),
        evidence,
        detail: FindingDetail::DeadConversionWebhook(ConversionWebhookFacts {
            crd: name,
            group: group.clone(),
            kind: kind.clone(),
            service,
            backend: backend.to_owned(),
            versions,
            stored_versions: stored,
            blocks_namespaces: blocks,
            failed_lists,
            no_schema_difference: proof.no_schema_difference,
        }),
    })
}

/// ` (port 9443, path /convert)` when the webhook names them.
fn webhook_target(crd: &CustomResourceDefinition) -> String {
    let Some(s) = crd
        .spec
        .conversion
        .as_ref()
        .and_then(|c| c.webhook.as_ref())
        .and_then(|w| w.client_config.as_ref())
        .and_then(|c| c.service.as_ref())
    else {
        return String::new();
    };
    format!(
        " (port {}, path {})",
        s.port.unwrap_or(443),
        s.path.as_deref().unwrap_or("/")
    )
}

/// Terminating namespaces whose deletion-failure condition quotes this
/// conversion failing, by name, with the condition's type.
fn blocked_namespaces(snapshot: &Snapshot, group: &str, kind: &str) -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = snapshot
        .namespaces
        .iter()
        .filter(|ns| ns.metadata.deletion_timestamp.is_some())
        .filter_map(|ns| {
            let name = ns.metadata.name.clone()?;
            [NS_CONTENT_FAILURE, NS_DISCOVERY_FAILURE]
                .into_iter()
                .find(|t| {
                    failing_namespace_condition(ns, t)
                        .and_then(|c| c.message.as_deref())
                        .is_some_and(|m| quotes(m, group, kind))
                })
                .map(|t| (name, t))
        })
        .collect();
    out.sort();
    out
}

/// Terminating namespaces, other than `blocked`, that carry no condition
/// at all.
fn silent_namespaces(snapshot: &Snapshot, blocked: &[(String, &str)]) -> Vec<String> {
    let mut out: Vec<String> = snapshot
        .namespaces
        .iter()
        .filter(|ns| ns.metadata.deletion_timestamp.is_some())
        .filter(|ns| {
            ns.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_none_or(|c| c.is_empty())
        })
        .filter_map(|ns| ns.metadata.name.clone())
        .filter(|n| !blocked.iter().any(|(b, _)| b == n))
        .collect();
    out.sort();
    out
}

/// For a namespace's content-deletion failure message: the CRDs whose
/// conversion it quotes failing, and one evidence line each saying whether
/// that conversion webhook's backend is proven gone.
pub fn explain_message(snapshot: &Snapshot, message: &str) -> (Vec<String>, Vec<String>) {
    let mut crds = Vec::new();
    let mut evidence = Vec::new();
    for f in failed_conversions(message) {
        let what = format!(
            "the conversion webhook for {}/{}, Kind={}",
            f.group, f.version, f.kind
        );
        let Some(crd) = snapshot
            .conversion_webhook_crds
            .iter()
            .find(|c| c.spec.group == f.group && c.spec.names.kind == f.kind)
        else {
            evidence.push(format!(
                "{what} fails, but no CRD of that group and kind converts through a webhook in the snapshot any more (its conversion was changed or the CRD is gone): the controller's next retry reads it afresh"
            ));
            continue;
        };
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.push(name.clone());
        match conversion_service(crd) {
            None => evidence.push(format!(
                "{what} (CRD {name}) fails; it calls a URL, which is never judged gone, so nothing is changed"
            )),
            Some(service) => {
                let j = judge(snapshot.service_lookup(&service));
                if let BackendState::Gone(reason) = j.state {
                    evidence.push(format!(
                        "{what} (CRD {name}) fails: its Service {service} is gone ({reason}); see the DeadConversionWebhook finding for CRD {name}"
                    ));
                } else {
                    evidence.push(format!(
                        "{what} (CRD {name}) fails; its Service {service} was not proven gone, so nothing is changed: {}",
                        j.evidence.join("; ")
                    ));
                }
            }
        }
    }
    (crds, evidence)
}

/// Whether every conversion failure `message` quotes is of a CRD that no
/// longer converts through a webhook: the condition is from before a
/// change, and the namespace controller's next retry will read the
/// objects. `false` when the message quotes none, or the CRDs were not
/// read.
pub fn no_longer_converted_by_webhook(snapshot: &Snapshot, message: &str) -> bool {
    let failed = failed_conversions(message);
    let crds_read = !snapshot
        .unreadable
        .iter()
        .any(|u| u.resource == CRD_RESOURCE);
    crds_read
        && !failed.is_empty()
        && failed.iter().all(|f| {
            !snapshot
                .conversion_webhook_crds
                .iter()
                .any(|c| c.spec.group == f.group && c.spec.names.kind == f.kind)
        })
}

/// CustomResourceDefinitions as kubectl spells them (what
/// [`Snapshot::unreadable`] records when they could not be listed).
pub const CRD_RESOURCE: &str = "customresourcedefinitions.apiextensions.k8s.io";

#[cfg(test)]
mod tests;

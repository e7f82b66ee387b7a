//! Namespace remedies: `PUT /finalize` ([`FinalizeNamespace`]) only for a
//! namespace provably empty with discovery complete, and the waits and
//! refusals for namespaces blocked by content, discovery, failing content
//! deletes or a namespace controller that is not progressing.

use k8s_openapi::api::core::v1::Namespace;
use serde::{Deserialize, Serialize};

use super::{
    Action, FORCE_FINALIZE, PlannedStep, REFUSED_ON_DISCOVERY, refuse, refuse_until_discovery,
    related_findings, wait,
};
use crate::doctor::conditions::{NS_DISCOVERY_FAILURE, failing_namespace_condition};
use crate::doctor::model::{
    ApiServiceFacts, ConversionWebhookFacts, DeadWebhookFacts, Finding, FindingDetail, FindingKind,
    Snapshot,
};
use crate::doctor::owner::failing_group_versions;
use crate::doctor::webhook::{may_have_failed, webhooks};
use crate::text::or_none;

/// `PUT /api/v1/namespaces/<name>/finalize` without the stuck tokens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalizeNamespace {
    /// Namespace name.
    pub name: String,
    /// UID as seen.
    pub uid: String,
    /// resourceVersion as seen.
    pub resource_version: Option<String>,
    /// `spec.finalizers` as seen.
    pub current: Vec<String>,
    /// The tokens to clear.
    pub remove_tokens: Vec<String>,
}

/// Why a `/finalize` body could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FinalizeError {
    /// The namespace read back is another incarnation.
    #[error(
        "namespace {name} has uid {found}, the plan was made for uid {expected}",
        found = or_none(.found.as_deref())
    )]
    UidChanged {
        /// Namespace name.
        name: String,
        /// UID in the plan.
        expected: String,
        /// UID read back.
        found: Option<String>,
    },
    /// The namespace read back changed since the read the plan was argued
    /// on (its resourceVersion moved): not written, looked at again.
    #[error(
        "namespace {name} changed since it was read (resourceVersion {found}, the plan was made at {expected})",
        found = or_none(.found.as_deref())
    )]
    ResourceVersionChanged {
        /// Namespace name.
        name: String,
        /// resourceVersion in the plan.
        expected: String,
        /// resourceVersion read back.
        found: Option<String>,
    },
    /// The namespace read back has none of the tokens any more.
    #[error("namespace {name} no longer has any of the tokens [{}] in spec.finalizers", tokens.join(", "))]
    NothingToRemove {
        /// Namespace name.
        name: String,
        /// Tokens the plan meant to remove.
        tokens: Vec<String>,
    },
}

impl FinalizeNamespace {
    /// `/api/v1/namespaces/<name>/finalize`.
    pub fn api_path(&self) -> String {
        format!("/api/v1/namespaces/{}/finalize", self.name)
    }

    /// `current` without `remove_tokens`.
    pub fn kept(&self) -> Vec<String> {
        self.current
            .iter()
            .filter(|t| !self.remove_tokens.contains(t))
            .cloned()
            .collect()
    }

    /// The PUT body, built from the namespace as just read back (`fresh`):
    /// the whole object (the finalize subresource takes metadata from the
    /// body, so a partial body would drop labels and metadata.finalizers)
    /// with only `spec.finalizers` changed. `fresh`'s resourceVersion is
    /// kept, so the PUT fails with a conflict if the namespace changes
    /// between the read and the write. Fails if `fresh` is another
    /// incarnation, has changed since the plan's read (its resourceVersion,
    /// when the plan has one) or no longer has any token to remove.
    pub fn body(&self, fresh: &Namespace) -> Result<Namespace, FinalizeError> {
        if fresh.metadata.uid.as_deref() != Some(self.uid.as_str()) {
            return Err(FinalizeError::UidChanged {
                name: self.name.clone(),
                expected: self.uid.clone(),
                found: fresh.metadata.uid.clone(),
            });
        }
        if let Some(expected) = &self.resource_version
            && fresh.metadata.resource_version.as_ref() != Some(expected)
        {
            return Err(FinalizeError::ResourceVersionChanged {
                name: self.name.clone(),
                expected: expected.clone(),
                found: fresh.metadata.resource_version.clone(),
            });
        }
        let tokens = fresh
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.clone())
            .unwrap_or_default();
        if !tokens.iter().any(|t| self.remove_tokens.contains(t)) {
            return Err(FinalizeError::NothingToRemove {
                name: self.name.clone(),
                tokens: self.remove_tokens.clone(),
            });
        }
        let mut body = fresh.clone();
        body.spec.get_or_insert_with(Default::default).finalizers = Some(
            tokens
                .into_iter()
                .filter(|t| !self.remove_tokens.contains(t))
                .collect(),
        );
        Ok(body)
    }
}

/// NamespaceBlockedByContent: the plan removes the blockers, not the namespace.
pub(super) fn blocked_by_content(i: usize, f: &Finding, all: &[Finding]) -> PlannedStep {
    let ns = &f.subject.name;
    let related = related_findings(all, |g| {
        g.subject.namespace.as_deref() == Some(ns.as_str())
            && matches!(
                g.kind(),
                FindingKind::OrphanFinalizer
                    | FindingKind::WaitingOnLiveController
                    | FindingKind::UnknownFinalizerOwner
                    | FindingKind::ProtectedFinalizerInUse
                    | FindingKind::PodStuckTerminating
            )
    });
    wait(
        i,
        format!("namespace {ns}: the namespace controller finishes once its content is gone"),
        format!("the plan removes the blockers, not the namespace{related}"),
    )
}

/// NamespaceBlockedByDiscovery: never /finalize on a discovery failure.
pub(super) fn blocked_by_discovery(i: usize, f: &Finding, all: &[Finding]) -> PlannedStep {
    let names = match &f.detail {
        FindingDetail::NamespaceBlockedByDiscovery { api_services, .. } => api_services.join(", "),
        _ => String::new(),
    };
    let ns = &f.subject.name;
    let related = related_findings(all, |g| {
        matches!(&g.detail, FindingDetail::DeadApiService(ApiServiceFacts { blocks_namespaces, .. })
                    if blocks_namespaces.contains(ns))
    });
    wait(
        i,
        format!(
            "namespace {ns}: the namespace controller finishes once discovery of APIService(s) {names} works again or they are removed"
        ),
        format!(
            "/finalize is not used for a discovery failure: content of the failing groups cannot be proven gone{related}"
        ),
    )
}

/// NamespaceContentDeletionFailed: wait on the dead webhooks' remedies,
/// or on the controller's retry once they no longer fail closed.
pub(super) fn content_deletion_failed(
    i: usize,
    f: &Finding,
    all: &[Finding],
    snapshot: &Snapshot,
) -> PlannedStep {
    let ns = &f.subject.name;
    let related = related_findings(all, |g| {
        matches!(&g.detail, FindingDetail::DeadWebhook(DeadWebhookFacts { blocks_namespaces, .. })
                    | FindingDetail::WebhookBackendFailing { blocks_namespaces, .. }
                    | FindingDetail::DeadConversionWebhook(ConversionWebhookFacts { blocks_namespaces, .. })
                    if blocks_namespaces.contains(ns))
    });
    // After a webhook was made to fail open (or removed), the
    // condition stays until the controller's next retry.
    let (named, message) = match &f.detail {
        FindingDetail::NamespaceContentDeletionFailed { webhooks, message } => {
            (webhooks.clone(), message.as_str())
        }
        _ => (Vec::new(), ""),
    };
    let views = webhooks(snapshot);
    let namespace = snapshot
        .namespaces
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(ns.as_str()));
    // Only the webhooks of each name the failure can mean count: another
    // configuration's webhook of the same name says nothing of it.
    let settled = !named.is_empty()
        && named.iter().all(|n| {
            views
                .iter()
                .filter(|w| w.name == n.as_str())
                .filter(|w| namespace.is_none_or(|ns| may_have_failed(w, ns, message)))
                .all(|w| w.failure_policy != "Fail")
        });
    if related.is_empty()
        && crate::doctor::conversion::no_longer_converted_by_webhook(snapshot, message)
    {
        wait(
            i,
            format!(
                "namespace {ns}: the CRD conversion it quotes no longer calls a webhook; the namespace controller's next retry deletes the content"
            ),
            "the condition is from before the change; the controller retries at least every 60 s"
                .into(),
        )
    } else if related.is_empty() && settled {
        wait(
            i,
            format!(
                "namespace {ns}: the webhook(s) {} no longer fail closed; the namespace controller's next retry deletes the content",
                named.join(", ")
            ),
            "the condition is from before the change; the controller retries at least every 60 s"
                .into(),
        )
    } else if related.is_empty() {
        refuse(
            i,
            format!(
                "namespace {ns}: the namespace controller's deletes fail and no dead webhook explains it; read the condition's error and fix its cause"
            ),
        )
    } else {
        wait(
            i,
            format!(
                "namespace {ns}: the namespace controller finishes once its deletes are no longer rejected"
            ),
            format!(
                "/finalize is not used: the content it failed to delete is still there{related}"
            ),
        )
    }
}

/// NamespaceNotProgressing: the controller, not the namespace, needs fixing.
pub(super) fn not_progressing(i: usize, f: &Finding, all: &[Finding]) -> PlannedStep {
    refuse(
        i,
        format!(
            "{} waits on the namespace controller, which is not progressing; get kube-controller-manager running and leading again (or clear the cluster-wide blocker{}): finalizing the namespace by hand would leave its content behind",
            f.subject,
            // A type whose every list fails holds the controller on
            // namespaces with none of it (seen on v1.34.4).
            related_findings(all, |g| matches!(&g.detail,
                    FindingDetail::DeadConversionWebhook(ConversionWebhookFacts { failed_lists, .. }) if !failed_lists.is_empty()))
        ),
    )
}

pub(super) fn finalize_namespace(i: usize, f: &Finding, snapshot: &Snapshot) -> PlannedStep {
    let name = &f.subject.name;
    let Some(ns) = snapshot.namespace(name) else {
        return refuse(
            i,
            format!("namespace {name} is not in the snapshot any more"),
        );
    };
    let Some(uid) = ns.metadata.uid.clone() else {
        return refuse(i, format!("namespace {name} has no uid in the snapshot"));
    };
    let current = ns
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.clone())
        .unwrap_or_default();
    let stuck = match &f.detail {
        FindingDetail::NamespaceSpecFinalizerStuck { stuck_tokens, .. } => stuck_tokens.clone(),
        _ => Vec::new(),
    };
    let remove_tokens: Vec<String> = current
        .iter()
        .filter(|t| stuck.contains(t))
        .cloned()
        .collect();
    if remove_tokens.is_empty() {
        return refuse(
            i,
            format!(
                "namespace {name} no longer has any of the tokens [{}]",
                stuck.join(", ")
            ),
        );
    }
    let mut content: Vec<String> = snapshot
        .content_of(name)
        .map(|r| format!("{} {}", r.kind, r.name()))
        .collect();
    content.sort();
    content.dedup();
    if !content.is_empty() {
        let shown: Vec<&str> = content.iter().take(10).map(String::as_str).collect();
        return refuse(
            i,
            format!(
                "refusing /finalize on namespace {name}: content remains ({} object(s): {}{}); finalizing now would orphan it in storage. Remove the blockers and let the namespace controller finish",
                content.len(),
                shown.join(", "),
                if content.len() > shown.len() {
                    ", ..."
                } else {
                    ""
                }
            ),
        );
    }
    if !snapshot.discovery_failures.is_empty() {
        return refuse_until_discovery(
            i,
            format!(
                "refusing /finalize on namespace {name}: {REFUSED_ON_DISCOVERY} {}, so its content cannot be proven gone",
                failing_group_versions(snapshot)
            ),
        );
    }
    if failing_namespace_condition(ns, NS_DISCOVERY_FAILURE).is_some() {
        return refuse(
            i,
            format!(
                "refusing /finalize on namespace {name}: its {NS_DISCOVERY_FAILURE} condition is set, so its content cannot be proven gone"
            ),
        );
    }
    let action = FinalizeNamespace {
        name: name.clone(),
        uid,
        resource_version: ns.metadata.resource_version.clone(),
        current,
        remove_tokens,
    };
    let rationale = format!(
        "namespace {name} is provably empty (no objects listed in it, discovery complete) but keeps spec.finalizers [{}] that nothing will remove; /finalize with only those tokens removed",
        action.remove_tokens.join(", ")
    );
    PlannedStep {
        finding_index: i,
        action: Action::FinalizeNamespace(action),
        rationale,
        force_level: FORCE_FINALIZE,
    }
}

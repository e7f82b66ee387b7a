//! From [`Finding`]s to a remedy [`Plan`]: pure. Least force first; every
//! mutating step is re-argued against the snapshot, not taken on the
//! finding's word, so a plan never strips a finalizer whose owner is alive,
//! never touches a healthy APIService and never finalizes a namespace whose
//! content is not provably gone.

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Namespace;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::conditions::{NS_DISCOVERY_FAILURE, api_service_available, failing_namespace_condition};
use super::finding::{FinalizerRemoval, Finding, FindingDetail, FindingKind, PodStuckHint};
use super::owner::{
    OwnerCache, OwnerQuery, OwnerVerdict, failing_group_versions, protection_in_use,
};
use super::snapshot::{ObjectRecord, Snapshot, split_api_version};
use super::webhook::{WebhookConfigKind, webhooks};

mod conversion;
pub use conversion::{FORCE_CRD_CONVERSION_NONE, SetCrdConversionNone};

/// Force level of a step that changes nothing (wait, observe, refuse).
pub const FORCE_OBSERVE: u8 = 0;
/// Force level of removing dead finalizer keys from one object.
pub const FORCE_REMOVE_FINALIZER: u8 = 1;
/// Force level of deleting a dead registration (an APIService).
pub const FORCE_DELETE_REGISTRATION: u8 = 2;
/// Force level of making a dead webhook fail open (`failurePolicy:
/// Ignore`). Also gated: the doctor applies it only when told it may
/// change webhooks ([`Action::needs_webhook_consent`]).
pub const FORCE_WEBHOOK_FAIL_OPEN: u8 = 2;
/// Force level of `PUT /api/v1/namespaces/<ns>/finalize`.
pub const FORCE_FINALIZE: u8 = 3;
/// Force level of a force delete (grace 0). No step of this level is
/// planned today; the level is reserved so callers can cap force.
pub const FORCE_DELETE: u8 = 4;

/// The APIService reasons that say the backend itself is missing or broken
/// (a registration whose extension was removed). `ServiceAccessError` and
/// `EndpointsAccessError` (status Unknown) say the aggregator could not
/// look, which is no proof the backend is gone.
const BACKEND_GONE_REASONS: [&str; 5] = [
    "ServiceNotFound",
    "EndpointsNotFound",
    "MissingEndpoints",
    "ServicePortError",
    "FailedDiscoveryCheck",
];

/// The remedy for a diagnosis: steps ordered by force, least first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Steps that change nothing first, then a dead webhook's fail-open
    /// (it unblocks the rest), then by `force_level`, then by finding index.
    pub steps: Vec<PlannedStep>,
    /// Steps a webhook that fails closed with its backend gone rejects:
    /// they are written only once that webhook fails open.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<BlockedStep>,
}

/// A step that a dead webhook rejects until it fails open.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedStep {
    /// The finding whose step is rejected.
    pub finding_index: usize,
    /// The DeadWebhook finding that rejects it.
    pub webhook_finding: usize,
    /// The webhook's name.
    pub webhook: String,
    /// The Service it calls, `namespace/name`.
    pub service: String,
}

impl Plan {
    /// The dead webhooks that reject the step made for `finding_index`.
    pub fn blockers_of(&self, finding_index: usize) -> impl Iterator<Item = &BlockedStep> {
        self.blocked
            .iter()
            .filter(move |b| b.finding_index == finding_index)
    }
}

/// One step of a [`Plan`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedStep {
    /// Index into the findings the plan was made from.
    pub finding_index: usize,
    /// What to do.
    pub action: Action,
    /// Why, in one or two human sentences, with the deciding evidence.
    pub rationale: String,
    /// How much force the step applies: 0 wait/observe/refuse (changes
    /// nothing), 1 remove one object's dead finalizers, 2 delete a dead
    /// registration, 3 `/finalize` a namespace, 4 force delete.
    pub force_level: u8,
}

/// What a step does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum Action {
    /// Change nothing; the cluster resolves it (a live controller, a
    /// protection in use, a namespace whose blockers other steps remove).
    Wait {
        /// What is being waited for.
        reason: String,
    },
    /// The doctor declines to act, and says why.
    Refuse {
        /// Why no remedy is planned.
        reason: String,
    },
    /// JSON-patch the dead keys out of one object's `metadata.finalizers`.
    RemoveFinalizers(RemoveFinalizers),
    /// Delete a dead APIService registration (after saving its manifest).
    DeleteApiService(DeleteApiService),
    /// `PUT /api/v1/namespaces/<ns>/finalize` without the stuck tokens.
    FinalizeNamespace(FinalizeNamespace),
    /// Make one dead webhook fail open (`failurePolicy: Ignore`), after
    /// saving its configuration.
    SetWebhookFailurePolicy(SetWebhookFailurePolicy),
    /// Switch one CRD whose conversion webhook is dead to conversion
    /// strategy `None`, after saving it; only when proven lossless.
    SetCrdConversionNone(SetCrdConversionNone),
}

impl Action {
    /// The variant name, e.g. `RemoveFinalizers`.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Wait { .. } => "Wait",
            Action::Refuse { .. } => "Refuse",
            Action::RemoveFinalizers(_) => "RemoveFinalizers",
            Action::DeleteApiService(_) => "DeleteApiService",
            Action::FinalizeNamespace(_) => "FinalizeNamespace",
            Action::SetWebhookFailurePolicy(_) => "SetWebhookFailurePolicy",
            Action::SetCrdConversionNone(_) => "SetCrdConversionNone",
        }
    }

    /// Whether the step changes how the API server converts a CRD's
    /// objects, which the doctor does only with explicit consent on top of
    /// `--apply` (`--allow-crd-conversion-changes`).
    pub fn needs_conversion_consent(&self) -> bool {
        matches!(self, Action::SetCrdConversionNone(_))
    }

    /// Whether the step changes admission policy, which the doctor does
    /// only with explicit consent on top of `--apply`: a fail-open webhook
    /// lets through what its policy would have rejected.
    pub fn needs_webhook_consent(&self) -> bool {
        matches!(self, Action::SetWebhookFailurePolicy(_))
    }

    /// Whether the action changes the cluster.
    pub fn is_mutating(&self) -> bool {
        !matches!(self, Action::Wait { .. } | Action::Refuse { .. })
    }
}

/// Where an object lives in the API, and which incarnation of it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectTarget {
    /// `v1` or `group/version`.
    pub api_version: String,
    /// e.g. `ConfigMap`.
    pub kind: String,
    /// Plural resource, e.g. `configmaps`.
    pub resource: String,
    /// Namespace, `None` when cluster-scoped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// UID (the patch tests it).
    pub uid: String,
    /// resourceVersion as seen in the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

impl ObjectTarget {
    /// The object's API path: `/api/v1[/namespaces/<ns>]/<resource>/<name>`
    /// for the core group, `/apis/<group>/<version>[/namespaces/<ns>]/<resource>/<name>`
    /// otherwise.
    pub fn api_path(&self) -> String {
        let (group, version) = split_api_version(&self.api_version);
        let base = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        match &self.namespace {
            Some(ns) => format!("{base}/namespaces/{ns}/{}/{}", self.resource, self.name),
            None => format!("{base}/{}/{}", self.resource, self.name),
        }
    }
}

impl std::fmt::Display for ObjectTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} ", self.api_version, self.kind)?;
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}/")?;
        }
        f.write_str(&self.name)
    }
}

/// Remove dead keys from one object's `metadata.finalizers`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoveFinalizers {
    /// The object.
    pub target: ObjectTarget,
    /// `metadata.finalizers` as seen (the patch tests exactly this list).
    pub current: Vec<String>,
    /// The keys to remove.
    pub remove: Vec<String>,
}

impl RemoveFinalizers {
    /// `current` without `remove`, order kept.
    pub fn kept(&self) -> Vec<String> {
        self.current
            .iter()
            .filter(|k| !self.remove.contains(k))
            .cloned()
            .collect()
    }

    /// The RFC 6902 patch (`application/json-patch+json`): `test` the UID,
    /// the resourceVersion read (when known) and the whole current
    /// finalizer list, then `replace` the list with the kept keys (`[]`
    /// when none are kept, never `null`). If anything changed since the
    /// read the verdict was argued on, a `test` fails and nothing is
    /// written.
    pub fn json_patch(&self) -> Value {
        let mut ops =
            vec![json!({"op": "test", "path": "/metadata/uid", "value": self.target.uid})];
        if let Some(rv) = &self.target.resource_version {
            ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
        }
        ops.push(json!({"op": "test", "path": "/metadata/finalizers", "value": self.current}));
        ops.push(json!({"op": "replace", "path": "/metadata/finalizers", "value": self.kept()}));
        Value::Array(ops)
    }
}

/// Delete one APIService registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteApiService {
    /// e.g. `v1beta1.metrics.k8s.io`.
    pub name: String,
    /// Precondition.
    pub uid: String,
    /// Precondition.
    pub resource_version: String,
    /// Why it is dead (the Available reason and message).
    pub reason: String,
}

impl DeleteApiService {
    /// `/apis/apiregistration.k8s.io/v1/apiservices/<name>`.
    pub fn api_path(&self) -> String {
        format!("/apis/apiregistration.k8s.io/v1/apiservices/{}", self.name)
    }

    /// The DELETE body: `DeleteOptions` with uid and resourceVersion
    /// preconditions, so a re-created or changed registration is not
    /// deleted.
    pub fn delete_options(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": self.uid, "resourceVersion": self.resource_version},
        })
    }
}

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
    #[error("namespace {name} has uid {found:?}, the plan was made for uid {expected}")]
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
        "namespace {name} changed since it was read (resourceVersion {found:?}, the plan was made at {expected})"
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

impl Plan {
    /// Whether the plan has no steps.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The steps that change the cluster, in order.
    pub fn mutating_steps(&self) -> impl Iterator<Item = &PlannedStep> {
        self.steps.iter().filter(|s| s.action.is_mutating())
    }

    /// Human text: every step with the exact API calls it would make.
    pub fn render_dry_run(&self) -> String {
        let mut out = String::new();
        let mutating = self.mutating_steps().count();
        let _ = writeln!(
            out,
            "Plan (dry run, nothing is changed): {} step(s), {mutating} would change the cluster; least force first",
            self.steps.len()
        );
        for (i, step) in self.steps.iter().enumerate() {
            let _ = writeln!(
                out,
                "{:>2}. [force {}] {} (finding #{})",
                i + 1,
                step.force_level,
                step.action.name(),
                // Findings are numbered from 1 where reports list them.
                step.finding_index + 1
            );
            match &step.action {
                Action::Wait { reason } => {
                    let _ = writeln!(out, "    no API call; waiting: {reason}");
                }
                Action::Refuse { reason } => {
                    let _ = writeln!(out, "    no API call; refused: {reason}");
                }
                Action::RemoveFinalizers(r) => {
                    let path = r.target.api_path();
                    let _ = writeln!(out, "    GET {path} (save the manifest first)");
                    let _ = writeln!(
                        out,
                        "    PATCH {path} (application/json-patch+json) {}",
                        r.json_patch()
                    );
                    let _ = writeln!(
                        out,
                        "    finalizers [{}] -> [{}]",
                        r.current.join(", "),
                        r.kept().join(", ")
                    );
                }
                Action::DeleteApiService(d) => {
                    let path = d.api_path();
                    let _ = writeln!(
                        out,
                        "    GET {path} (save the manifest first; re-apply it to undo)"
                    );
                    let _ = writeln!(
                        out,
                        "    DELETE {path} (precondition uid={}, resourceVersion={})",
                        d.uid, d.resource_version
                    );
                }
                Action::SetWebhookFailurePolicy(w) => {
                    let path = w.api_path();
                    let _ = writeln!(
                        out,
                        "    GET {path} (save the manifest first; re-apply it to restore failurePolicy Fail)"
                    );
                    let _ = writeln!(
                        out,
                        "    PATCH {path} (application/json-patch+json) {}",
                        w.json_patch()
                    );
                    let _ = writeln!(
                        out,
                        "    needs --allow-webhook-changes besides --apply: the webhook fails open until restored"
                    );
                }
                Action::SetCrdConversionNone(c) => c.render(&mut out),
                Action::FinalizeNamespace(f) => {
                    let _ = writeln!(
                        out,
                        "    GET /api/v1/namespaces/{} (save the manifest first; it is the PUT body)",
                        f.name
                    );
                    let _ = writeln!(
                        out,
                        "    PUT {} (spec.finalizers [{}] -> [{}]; uid={}, resourceVersion={})",
                        f.api_path(),
                        f.current.join(", "),
                        f.kept().join(", "),
                        f.uid,
                        f.resource_version.as_deref().unwrap_or("as read")
                    );
                }
            }
            let repeated =
                matches!(&step.action, Action::Refuse { reason } if *reason == step.rationale);
            if !repeated {
                let _ = writeln!(out, "    why: {}", step.rationale);
            }
        }
        out
    }
}

/// Plans the remedy for `findings` (as returned by
/// [`super::diagnose()`]) against the snapshot they came from.
/// The words of a refusal made only because discovery failed at that
/// moment: the caller may collect again (`unstuck`'s doctor does, briefly).
pub const REFUSED_ON_DISCOVERY: &str = "discovery failed for";

pub fn plan(findings: &[Finding], snapshot: &Snapshot) -> Plan {
    let owners = OwnerCache::new(snapshot);
    let mut steps: Vec<PlannedStep> = findings
        .iter()
        .enumerate()
        .map(|(i, f)| step_for(i, f, findings, snapshot, &owners))
        .collect();
    let blocked = blocked_steps(findings, &steps);
    for b in &blocked {
        if let Some(step) = steps
            .iter_mut()
            .find(|s| s.finding_index == b.finding_index && s.action.is_mutating())
        {
            step.rationale.push_str(&format!(
                ". Webhook {:?} (finding #{}) rejects this write while it fails closed with its backend (Service {}) gone: its fail-open comes first and needs --allow-webhook-changes; or restore the Service",
                b.webhook,
                b.webhook_finding + 1,
                b.service
            ));
        }
    }
    // Least force first, except that making a dead webhook fail open
    // comes before the other changes: while it fails closed it rejects
    // the very patches and deletes they make (every call to it fails
    // already, so no admission decision that could pass is changed).
    steps.sort_by_key(|s| {
        let unblocks = matches!(
            s.action,
            Action::SetWebhookFailurePolicy(_) | Action::SetCrdConversionNone(_)
        );
        (
            s.action.is_mutating(),
            !unblocks,
            s.force_level,
            s.finding_index,
        )
    });
    Plan { steps, blocked }
}

/// Which planned writes each dead webhook rejects (from the findings'
/// [`super::rejected`] links).
fn blocked_steps(findings: &[Finding], steps: &[PlannedStep]) -> Vec<BlockedStep> {
    let mut out = Vec::new();
    for (wi, w) in findings.iter().enumerate() {
        let FindingDetail::Webhook {
            webhook,
            service,
            rejects,
            ..
        } = &w.detail
        else {
            continue;
        };
        for s in steps.iter().filter(|s| s.action.is_mutating()) {
            let subject = &findings[s.finding_index].subject;
            if rejects.iter().any(|r| r.subject == *subject) {
                out.push(BlockedStep {
                    finding_index: s.finding_index,
                    webhook_finding: wi,
                    webhook: webhook.clone(),
                    service: service.to_string(),
                });
            }
        }
    }
    out
}

fn observe(finding_index: usize, action: Action, rationale: String) -> PlannedStep {
    PlannedStep {
        finding_index,
        action,
        rationale,
        force_level: FORCE_OBSERVE,
    }
}

fn refuse(finding_index: usize, reason: String) -> PlannedStep {
    observe(
        finding_index,
        Action::Refuse {
            reason: reason.clone(),
        },
        reason,
    )
}

fn wait(finding_index: usize, reason: String, rationale: String) -> PlannedStep {
    observe(finding_index, Action::Wait { reason }, rationale)
}

fn step_for(
    i: usize,
    f: &Finding,
    all: &[Finding],
    snapshot: &Snapshot,
    owners: &OwnerCache,
) -> PlannedStep {
    match f.kind {
        FindingKind::OrphanFinalizer | FindingKind::NamespaceOrphanMetadataFinalizer => {
            match &f.detail {
                FindingDetail::OrphanFinalizer(rem) => {
                    remove_finalizers(i, f, rem, snapshot, owners)
                }
                _ => refuse(i, format!("{} finding without removal detail", f.kind)),
            }
        }
        FindingKind::WaitingOnLiveController => {
            let evidence = verdict_evidence(f);
            wait(
                i,
                format!("the controller serving {}'s finalizers is alive", f.subject),
                format!(
                    "a live controller will remove its finalizer when its cleanup is done; stripping it would skip that cleanup ({evidence})"
                ),
            )
        }
        FindingKind::ProtectedFinalizerInUse => {
            let (key, users) = match &f.detail {
                FindingDetail::Protected { finalizer, used_by } => {
                    (finalizer.clone(), used_by.join("; "))
                }
                _ => ("the protection finalizer".to_owned(), String::new()),
            };
            wait(
                i,
                format!(
                    "{key} on {} is released once nothing uses it ({users})",
                    f.subject
                ),
                format!(
                    "{key} is normal while the object is in use and is never stripped; if the user is itself stuck, fix that first"
                ),
            )
        }
        FindingKind::UnknownFinalizerOwner => refuse(
            i,
            format!(
                "the owner of {}'s finalizer(s) could not be argued dead ({}); a finalizer is removed only when its owner is shown dead: check that the controller runs",
                f.subject,
                verdict_evidence(f)
            ),
        ),
        FindingKind::NamespaceBlockedByContent => {
            let ns = &f.subject.name;
            let related = related_findings(all, |g| {
                g.subject.namespace.as_deref() == Some(ns.as_str())
                    && matches!(
                        g.kind,
                        FindingKind::OrphanFinalizer
                            | FindingKind::WaitingOnLiveController
                            | FindingKind::UnknownFinalizerOwner
                            | FindingKind::ProtectedFinalizerInUse
                            | FindingKind::PodStuckTerminating
                    )
            });
            wait(
                i,
                format!(
                    "namespace {ns}: the namespace controller finishes once its content is gone"
                ),
                format!("the plan removes the blockers, not the namespace{related}"),
            )
        }
        FindingKind::NamespaceBlockedByDiscovery => {
            let names = match &f.detail {
                FindingDetail::NamespaceDiscovery { api_services, .. } => api_services.join(", "),
                _ => String::new(),
            };
            let ns = &f.subject.name;
            let related = related_findings(all, |g| {
                g.kind == FindingKind::DeadApiService
                    && matches!(&g.detail, FindingDetail::ApiService { blocks_namespaces, .. } if blocks_namespaces.contains(ns))
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
        FindingKind::DeadApiService => delete_api_service(i, f, snapshot),
        FindingKind::ApiServiceUnavailable => refuse(
            i,
            format!(
                "{} is unavailable but its backend is not proven gone; it is left in place (restore its backend, or check its Service and endpoints)",
                f.subject
            ),
        ),
        FindingKind::DeadWebhook => webhook_fail_open(i, f, all, snapshot),
        FindingKind::DeadConversionWebhook => conversion::strategy_none(i, f, snapshot),
        FindingKind::WaitingOnDependents => {
            let leaves = match &f.detail {
                FindingDetail::Dependents { leaves, .. } => leaves.clone(),
                _ => Vec::new(),
            };
            let related = related_findings(all, |g| {
                g.kind != FindingKind::WaitingOnDependents
                    && leaves
                        .iter()
                        .any(|l| l.uid.is_some() && l.uid == g.subject.uid)
            });
            wait(
                i,
                format!(
                    "{}: the garbage collector removes foregroundDeletion once its dependents are gone",
                    f.subject
                ),
                format!(
                    "foregroundDeletion is never stripped from the owner (its dependents would be orphaned); the chain is freed at its {} leaf object(s){related}",
                    leaves.len()
                ),
            )
        }
        FindingKind::NamespaceContentDeletionFailed => {
            let ns = &f.subject.name;
            let related = related_findings(all, |g| {
                matches!(&g.detail, FindingDetail::Webhook { blocks_namespaces, .. }
                    | FindingDetail::ConversionWebhook { blocks_namespaces, .. }
                    if blocks_namespaces.contains(ns))
            });
            // After a webhook was made to fail open (or removed), the
            // condition stays until the controller's next retry.
            let (named, message) = match &f.detail {
                FindingDetail::NamespaceContentFailure { webhooks, message } => {
                    (webhooks.clone(), message.as_str())
                }
                _ => (Vec::new(), ""),
            };
            let views = webhooks(snapshot);
            let settled = !named.is_empty()
                && named.iter().all(|n| {
                    views
                        .iter()
                        .filter(|w| w.name == n.as_str())
                        .all(|w| w.failure_policy != "Fail")
                });
            if related.is_empty()
                && super::conversion::no_longer_converted_by_webhook(snapshot, message)
            {
                wait(
                    i,
                    format!(
                        "namespace {ns}: the CRD conversion it quotes no longer calls a webhook; the namespace controller's next retry deletes the content"
                    ),
                    "the condition is from before the change; the controller retries at least every 60 s".into(),
                )
            } else if related.is_empty() && settled {
                wait(
                    i,
                    format!(
                        "namespace {ns}: the webhook(s) {} no longer fail closed; the namespace controller's next retry deletes the content",
                        named.join(", ")
                    ),
                    "the condition is from before the change; the controller retries at least every 60 s".into(),
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
        FindingKind::NamespaceSpecFinalizerStuck => finalize_namespace(i, f, snapshot),
        FindingKind::PodNotStarting => refuse(
            i,
            format!(
                "{} is not stuck in deletion; what keeps it from starting is fixed in its spec, image or node, not by the doctor",
                f.subject
            ),
        ),
        FindingKind::NamespaceNotProgressing => refuse(
            i,
            format!(
                "{} waits on the namespace controller, which is not progressing; get kube-controller-manager running and leading again (or clear the cluster-wide blocker{}): finalizing the namespace by hand would leave its content behind",
                f.subject,
                // A type whose every list fails holds the controller on
                // namespaces with none of it (seen on v1.34.4).
                related_findings(all, |g| matches!(&g.detail,
                    FindingDetail::ConversionWebhook { failed_lists, .. } if !failed_lists.is_empty()))
            ),
        ),
        FindingKind::PodStuckTerminating
            if matches!(
                &f.detail,
                FindingDetail::Pod {
                    hint: PodStuckHint::DeleteRejected,
                    ..
                }
            ) =>
        {
            let related = related_findings(all, |g| g.kind == FindingKind::DeadWebhook);
            wait(
                i,
                format!(
                    "{}: the kubelet deletes it at its next status sync once the webhook rejecting its final DELETE no longer fails closed",
                    f.subject
                ),
                format!(
                    "no force delete and nothing on the node: the pod's containers are gone; what blocks is admission{related}"
                ),
            )
        }
        FindingKind::PodStuckTerminating => {
            let hint = match &f.detail {
                FindingDetail::Pod { hint, node, .. } => {
                    let node = node.as_deref().unwrap_or("<none>");
                    match hint {
                        PodStuckHint::VolumeTeardown => format!(
                            "release what keeps its volumes busy on node {node} and let the kubelet finish"
                        ),
                        PodStuckHint::RuntimeKill => format!(
                            "un-wedge the container runtime on node {node} and let the kubelet retry"
                        ),
                        PodStuckHint::NodeLost => format!(
                            "bring the kubelet on node {node} back (it then finishes the pod by itself); only if the node is known to be down for good, `kubectl taint node {node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute` lets the pod garbage collector delete its pods and their volumes detach (remove the taint when the node returns)"
                        ),
                        PodStuckHint::Unknown => format!("inspect the kubelet on node {node}"),
                        PodStuckHint::NetworkTeardown => format!(
                            "repair the network plugin on node {node} (its binary, configuration, or what it calls); killing shims or restarting the runtime does not help, and a force delete would leak the sandbox, its network namespace and its IP"
                        ),
                        PodStuckHint::DeleteRejected => format!(
                            "make the webhook rejecting the kubelet's final DELETE fail open, then the kubelet on node {node} finishes"
                        ),
                    }
                }
                _ => "inspect the kubelet on its node".to_owned(),
            };
            refuse(
                i,
                format!(
                    "{} needs a node-level remedy: {hint}; a force delete (grace 0) is the last resort and is not planned by the API doctor",
                    f.subject
                ),
            )
        }
    }
}

fn verdict_evidence(f: &Finding) -> String {
    match &f.detail {
        FindingDetail::Finalizers { verdicts, .. } => verdicts
            .iter()
            .map(|v| format!("{}: {}", v.finalizer, v.verdict.evidence().join("; ")))
            .collect::<Vec<_>>()
            .join("; "),
        _ => f.evidence.join("; "),
    }
}

fn related_findings(all: &[Finding], pred: impl Fn(&Finding) -> bool) -> String {
    let ids: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(_, g)| pred(g))
        .map(|(j, g)| format!("#{} {}", j + 1, g.kind))
        .collect();
    if ids.is_empty() {
        String::new()
    } else {
        format!(" (see finding(s) {})", ids.join(", "))
    }
}

/// The object a finding names, looked up again in the snapshot.
fn find_record(f: &Finding, snapshot: &Snapshot) -> Option<ObjectRecord> {
    let s = &f.subject;
    if s.api_version == "v1" && s.kind == "Namespace" {
        let ns = snapshot.namespace(&s.name)?;
        return Some(ObjectRecord {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            resource: "namespaces".into(),
            namespaced: false,
            metadata: ns.metadata.clone(),
        });
    }
    snapshot
        .terminating
        .iter()
        .chain(&snapshot.namespace_content)
        .find(|r| {
            r.api_version == s.api_version
                && r.kind == s.kind
                && r.name() == s.name
                && r.namespace() == s.namespace.as_deref()
                && (s.uid.is_none() || r.metadata.uid == s.uid)
        })
        .cloned()
}

fn remove_finalizers(
    i: usize,
    f: &Finding,
    rem: &FinalizerRemoval,
    snapshot: &Snapshot,
    owners: &OwnerCache,
) -> PlannedStep {
    let record = find_record(f, snapshot);
    let (current, resource_version, uid) = match &record {
        Some(r) => (
            r.finalizers().to_vec(),
            r.metadata.resource_version.clone(),
            r.metadata.uid.clone(),
        ),
        None => (
            rem.finalizers.clone(),
            rem.resource_version.clone(),
            f.subject.uid.clone(),
        ),
    };
    let Some(uid) = uid else {
        return refuse(
            i,
            format!(
                "{} has no known uid, so a patch could not be bound to this incarnation",
                f.subject
            ),
        );
    };
    // Re-argue every key against the snapshot: never strip a key whose
    // owner is not dead, or a protection key in use.
    let mut remove = Vec::new();
    let mut notes = Vec::new();
    let mut why_dead = Vec::new();
    for key in &rem.orphan {
        if !current.contains(key) {
            notes.push(format!("{key} is already gone"));
            continue;
        }
        if let Some(users) = protection_in_use(
            key,
            &f.subject.kind,
            f.subject.namespace.as_deref(),
            &f.subject.name,
            snapshot,
        ) {
            notes.push(format!("{key} is in use ({}), kept", users.join("; ")));
            continue;
        }
        // A key diagnosed dead only by `--assume-dead` stays assumed, and
        // is stripped only while the evidence is still no more than Unknown.
        let assumed: Vec<String> = rem
            .verdicts
            .iter()
            .filter(|v| v.assumed_dead && v.finalizer == *key)
            .map(|v| v.finalizer.clone())
            .collect();
        let recheck = owners.verdict(&OwnerQuery {
            finalizer: key,
            kind: &f.subject.kind,
            record: record.as_ref(),
            assume_dead: &assumed,
        });
        match recheck.verdict {
            OwnerVerdict::Dead { evidence } => {
                // The checks are the finding's evidence, quoted there in
                // full; the plan says how many were re-read, not them again.
                why_dead.push(if recheck.assumed_dead {
                    format!(
                        "{key}: assumed dead (--assume-dead {key}; the evidence alone is Unknown, see finding #{})",
                        i + 1
                    )
                } else {
                    format!(
                        "{key}: owner Dead again on re-check ({} checks, every source read; see finding #{})",
                        evidence.len(),
                        i + 1
                    )
                });
                remove.push(key.clone());
            }
            other => notes.push(format!(
                "{key}: owner {} on re-check ({}), kept",
                other.label(),
                other.evidence().join("; ")
            )),
        }
    }
    if remove.is_empty() {
        return refuse(
            i,
            format!(
                "no finalizer of {} can be removed on re-check: {}",
                f.subject,
                notes.join("; ")
            ),
        );
    }
    let action = RemoveFinalizers {
        target: ObjectTarget {
            api_version: f.subject.api_version.clone(),
            kind: f.subject.kind.clone(),
            resource: record
                .as_ref()
                .map_or(rem.resource.clone(), |r| r.resource.clone()),
            namespace: f.subject.namespace.clone(),
            name: f.subject.name.clone(),
            uid,
            resource_version,
        },
        current,
        remove,
    };
    let kept = action.kept();
    let mut rationale = format!(
        "remove only [{}] from {}: no live owner ({})",
        action.remove.join(", "),
        f.subject,
        why_dead.join("; ")
    );
    if !kept.is_empty() {
        let _ = write!(rationale, "; [{}] stay", kept.join(", "));
    }
    if !notes.is_empty() {
        let _ = write!(rationale, "; {}", notes.join("; "));
    }
    rationale.push_str("; the patch tests the uid, the resourceVersion and the current list, so a concurrent change makes it fail instead of being overwritten");
    PlannedStep {
        finding_index: i,
        action: Action::RemoveFinalizers(action),
        rationale,
        force_level: FORCE_REMOVE_FINALIZER,
    }
}

fn webhook_fail_open(i: usize, f: &Finding, all: &[Finding], snapshot: &Snapshot) -> PlannedStep {
    let FindingDetail::Webhook {
        configuration,
        configuration_name,
        index,
        webhook,
        service,
        backend,
        blocks_namespaces,
        rejects,
        ..
    } = &f.detail
    else {
        return refuse(i, format!("{} finding without webhook detail", f.kind));
    };
    // Re-argue from the snapshot: the webhook is still there, at the same
    // index, failing closed, and its Service lookup still proves it dead.
    let Some(w) = webhooks(snapshot).into_iter().find(|w| {
        w.config_kind == *configuration
            && w.config_name == configuration_name
            && w.index == *index
            && w.name == webhook
    }) else {
        return refuse(
            i,
            format!(
                "webhook {webhook:?} is not in {configuration_name} any more; nothing to change"
            ),
        );
    };
    if w.failure_policy != "Fail" {
        return refuse(
            i,
            format!(
                "webhook {webhook:?} already has failurePolicy {}",
                w.failure_policy
            ),
        );
    }
    let proven = super::backend::judge(snapshot.service_lookup(service)).is_gone();
    if !proven {
        return refuse(
            i,
            format!("the backend of webhook {webhook:?} (Service {service}) is not proven gone"),
        );
    }
    // A dead webhook is changed only for what it keeps stuck: a namespace
    // whose content deletes it rejects, a write that would release a stuck
    // object, or a stuck pod's final DELETE. One that blocks nothing stuck
    // is left as it is, whatever else it would reject.
    let blocks_pod_delete = w.matches_operation_on_pods("DELETE")
        && all.iter().any(|g| {
            matches!(
                g.detail,
                FindingDetail::Pod {
                    hint: PodStuckHint::DeleteRejected,
                    ..
                }
            )
        });
    if blocks_namespaces.is_empty() && rejects.is_empty() && !blocks_pod_delete {
        return wait(
            i,
            format!("webhook {webhook:?} keeps nothing stuck; it is left as it is"),
            format!(
                "webhook {webhook:?} fails closed with its Service {service} gone ({backend}), so it rejects everything it matches ({}), but no stuck object waits on it: restore its backend (or remove the configuration if its product is gone); the doctor changes a webhook only for what it keeps stuck",
                w.rules_line()
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
            "webhook {webhook:?} in {kind} {configuration_name} rejects what it matches because its Service {service} is gone ({backend}){}; restoring the backend is the gentler fix. Failing open keeps the registration (and any other webhook in it) and is undone by re-applying the saved manifest; deleting the configuration is never planned",
            keeps_stuck(blocks_namespaces, rejects, blocks_pod_delete)
        ),
        force_level: FORCE_WEBHOOK_FAIL_OPEN,
    }
}

/// What a dead webhook keeps stuck, for the fail-open's rationale.
fn keeps_stuck(
    blocks_namespaces: &[String],
    rejects: &[super::rejected::RejectedWrite],
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

fn delete_api_service(i: usize, f: &Finding, snapshot: &Snapshot) -> PlannedStep {
    let name = &f.subject.name;
    let Some(api) = snapshot.api_service(name) else {
        return refuse(
            i,
            format!("APIService {name} is not in the snapshot any more; nothing to delete"),
        );
    };
    if api.spec.as_ref().and_then(|s| s.service.as_ref()).is_none() {
        return refuse(
            i,
            format!(
                "APIService {name} is local (no spec.service); local registrations are never deleted"
            ),
        );
    }
    let Some(available) = api_service_available(api) else {
        return refuse(
            i,
            format!("APIService {name} has no Available condition; not judged dead"),
        );
    };
    if available.status == "True" {
        return refuse(
            i,
            format!("APIService {name} is Available; a healthy APIService is never deleted"),
        );
    }
    let reason = available.reason.clone().unwrap_or_default();
    let message = available.message.clone().unwrap_or_default();
    let blocks = match &f.detail {
        FindingDetail::ApiService {
            blocks_namespaces, ..
        } => blocks_namespaces.clone(),
        _ => Vec::new(),
    };
    // Re-argued from the snapshot: only the collector's lookup of the
    // Service proves the backend gone, never the condition alone.
    if let super::apiservice::Backend::Unproven(_) | super::apiservice::Backend::Serving(_) =
        super::apiservice::backend(api, available, &snapshot.api_service_backends)
    {
        return refuse(
            i,
            format!(
                "the backend of APIService {name} is not proven gone by a lookup of its Service ({reason}: {message}); nothing is deleted"
            ),
        );
    }
    if !BACKEND_GONE_REASONS.contains(&reason.as_str()) {
        return refuse(
            i,
            format!(
                "APIService {name} is {} ({reason}: {message}): the aggregator could not check its backend, which does not prove the backend gone; fix that first",
                available.status
            ),
        );
    }
    if blocks.is_empty() && reason != "ServiceNotFound" {
        return refuse(
            i,
            format!(
                "APIService {name} is unavailable ({reason}: {message}) but its Service still exists and it blocks no Terminating namespace: restore the backend (e.g. scale it up) rather than delete the registration"
            ),
        );
    }
    let (Some(uid), Some(rv)) = (
        api.metadata.uid.clone(),
        api.metadata.resource_version.clone(),
    ) else {
        return refuse(
            i,
            format!(
                "APIService {name} has no uid/resourceVersion in the snapshot; a delete could not be preconditioned"
            ),
        );
    };
    let rationale = format!(
        "APIService {name} is unavailable ({reason}: {message}){}; restoring its backend is the gentler fix when the extension is meant to stay, otherwise the registration is deleted after saving its manifest so it can be re-applied (check consumers such as HPAs of this group first)",
        if blocks.is_empty() {
            "; its backing Service is gone".to_owned()
        } else {
            format!(" and blocks deletion of namespace(s) {}", blocks.join(", "))
        }
    );
    PlannedStep {
        finding_index: i,
        action: Action::DeleteApiService(DeleteApiService {
            name: name.clone(),
            uid,
            resource_version: rv,
            reason: format!("{reason}: {message}"),
        }),
        rationale,
        force_level: FORCE_DELETE_REGISTRATION,
    }
}

fn finalize_namespace(i: usize, f: &Finding, snapshot: &Snapshot) -> PlannedStep {
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
        FindingDetail::NamespaceSpec { stuck_tokens, .. } => stuck_tokens.clone(),
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
        return refuse(
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

//! From [`Finding`]s to a remedy [`Plan`]: pure. Least force first; every
//! mutating step is re-argued against the snapshot, not taken on the
//! finding's word, so a plan never strips a finalizer whose owner is alive,
//! never touches a healthy APIService and never finalizes a namespace whose
//! content is not provably gone.

use serde::{Deserialize, Serialize};

use super::model::{DeadWebhookFacts, Finding, FindingDetail, Snapshot, split_api_version};
use super::owner::OwnerCache;

mod apiservice;
mod conversion;
mod expected;
mod finalizers;
mod load_balancer;
mod namespace;
mod pods;
mod render;
mod webhook;
pub use apiservice::DeleteApiService;
pub use conversion::{FORCE_CRD_CONVERSION_NONE, SetCrdConversionNone};
pub use expected::{ExpectedKey, ExpectedStep};
pub use finalizers::RemoveFinalizers;
pub use namespace::{FinalizeError, FinalizeNamespace};
pub use webhook::SetWebhookFailurePolicy;

use crate::text::quoted;

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

/// The remedy for a diagnosis: steps ordered by force, least first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Steps that change nothing first, then a dead webhook's fail-open
    /// (it unblocks the rest), then by `force_level`, then by finding index.
    pub steps: Vec<PlannedStep>,
    /// Steps a webhook that fails closed rejects: with its backend gone,
    /// they are written only once that webhook fails open; with its
    /// backend there but failing, only once the backend is repaired.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<BlockedStep>,
    /// What later rounds of `--apply --yes` are expected to meet once a
    /// dead webhook this plan fails open lets the namespace controller's
    /// DELETEs through: objects that will then hang on their finalizers,
    /// with each key's owner as argued now. Not steps: each is planned
    /// and shown again, on a fresh read, by the round that meets it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected: Vec<ExpectedStep>,
}

/// A step that a webhook failing closed rejects: a dead one until it
/// fails open, a failing one (backend there but slow or misconfigured)
/// until its backend is repaired.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedStep {
    /// The finding whose step is rejected.
    pub finding_index: usize,
    /// The DeadWebhook or WebhookBackendFailing finding that rejects it.
    pub webhook_finding: usize,
    /// The webhook's name.
    pub webhook: String,
    /// The Service it calls, `namespace/name` (its URL for a `url` webhook).
    pub service: String,
    /// For a webhook whose backend is there: how it fails (`slow`,
    /// `misconfigured: TLS`, ...). Such a webhook is never failed open, so
    /// the step waits for the backend's repair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing: Option<String>,
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
        /// What kind of refusal: one made only because discovery failed
        /// at that moment is worth asking again, briefly.
        #[serde(default, skip_serializing_if = "RefusalKind::is_final")]
        kind: RefusalKind,
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

/// The one write a mutating step makes (after a GET that saves the
/// object's manifest), for machines: the doctor's JSON carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiCall {
    /// `PATCH`, `DELETE` or `PUT`.
    pub method: String,
    pub path: String,
    /// The body's media type (`application/json-patch+json` for a patch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
}

impl ApiCall {
    fn new(method: &str, path: String, content_type: Option<&str>) -> Self {
        Self {
            method: method.into(),
            path,
            content_type: content_type.map(Into::into),
        }
    }
}

impl Action {
    /// The write the step makes; `None` for a wait or a refusal.
    pub fn api_call(&self) -> Option<ApiCall> {
        const JSON_PATCH: Option<&str> = Some("application/json-patch+json");
        Some(match self {
            Action::Wait { .. } | Action::Refuse { .. } => return None,
            Action::RemoveFinalizers(r) => ApiCall::new("PATCH", r.target.api_path(), JSON_PATCH),
            Action::DeleteApiService(d) => ApiCall::new("DELETE", d.api_path(), None),
            Action::FinalizeNamespace(f) => {
                ApiCall::new("PUT", f.api_path(), Some("application/json"))
            }
            Action::SetWebhookFailurePolicy(w) => ApiCall::new("PATCH", w.api_path(), JSON_PATCH),
            Action::SetCrdConversionNone(c) => ApiCall::new("PATCH", c.api_path(), JSON_PATCH),
        })
    }

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

impl Plan {
    /// Whether the plan has no steps.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The steps that change the cluster, in order.
    pub fn mutating_steps(&self) -> impl Iterator<Item = &PlannedStep> {
        self.steps.iter().filter(|s| s.action.is_mutating())
    }
}

/// The words of a refusal made only because discovery failed at that
/// moment: the caller may collect again (`unstuck`'s doctor does, briefly).
pub const REFUSED_ON_DISCOVERY: &str = "discovery failed for";

/// Plans the remedy for `findings` (as returned by
/// [`super::diagnose()`]) against the snapshot they came from.
pub fn plan(findings: &[Finding], snapshot: &Snapshot) -> Plan {
    plan_assuming(findings, snapshot, &[])
}

/// [`plan`], with the keys a person confirmed dead (`--assume-dead`, as
/// the diagnosis was given them): what the plan expects of objects that
/// are not stuck yet says the same as the findings about stuck ones.
pub fn plan_assuming(findings: &[Finding], snapshot: &Snapshot, assume_dead: &[String]) -> Plan {
    let owners = OwnerCache::new(snapshot);
    let mut steps: Vec<PlannedStep> = findings
        .iter()
        .enumerate()
        .map(|(i, f)| step_for(i, f, findings, snapshot, &owners))
        .collect();
    webhook::drop_purposeless_fail_opens(findings, &mut steps, snapshot);
    let blocked = blocked_steps(findings, &steps);
    for b in &blocked {
        if let Some(step) = steps
            .iter_mut()
            .find(|s| s.finding_index == b.finding_index && s.action.is_mutating())
        {
            step.rationale.push_str(&match &b.failing {
                None => format!(
                    ". Webhook {} (finding #{}) rejects this write while it fails closed with its backend (Service {}) gone: its fail-open comes first and needs --allow-webhook-changes; or restore the Service",
                    quoted(&b.webhook),
                    b.webhook_finding + 1,
                    b.service
                ),
                Some(verdict) if verdict == crate::doctor::backend::NOT_SERVING => format!(
                    ". Webhook {} (finding #{}) fails this write while its backend ({}) is not serving (no ready endpoint): with --allow-webhook-changes the doctor opens that one webhook (failurePolicy Ignore) for this write only and sets it back to Fail right after; or it is written once the backend serves again",
                    quoted(&b.webhook),
                    b.webhook_finding + 1,
                    b.service
                ),
                Some(verdict) => format!(
                    ". Webhook {} (finding #{}) fails this write while its backend ({}) is {verdict}, and the doctor never fails open a webhook whose backend is there: it is written once the backend is repaired",
                    quoted(&b.webhook),
                    b.webhook_finding + 1,
                    b.service
                ),
            });
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
    let expected =
        expected::expected_after_fail_open(findings, &steps, snapshot, &owners, assume_dead);
    Plan {
        steps,
        blocked,
        expected,
    }
}

/// Which planned writes each dead or failing webhook rejects (from the
/// findings' [`super::rejected`] links).
fn blocked_steps(findings: &[Finding], steps: &[PlannedStep]) -> Vec<BlockedStep> {
    let mut out = Vec::new();
    for (wi, w) in findings.iter().enumerate() {
        let (webhook, service, rejects, failing) = match &w.detail {
            FindingDetail::DeadWebhook(DeadWebhookFacts {
                webhook,
                service,
                rejects,
                ..
            }) => (webhook, service.to_string(), rejects, None),
            FindingDetail::WebhookBackendFailing {
                webhook,
                service,
                rejects,
                verdict,
                ..
            } => (
                webhook,
                service
                    .as_ref()
                    .map_or_else(|| "its URL".to_string(), |s| format!("Service {s}")),
                rejects,
                Some(verdict.clone()),
            ),
            _ => continue,
        };
        for s in steps.iter().filter(|s| s.action.is_mutating()) {
            let subject = &findings[s.finding_index].subject;
            if rejects.iter().any(|r| r.subject == *subject) {
                out.push(BlockedStep {
                    finding_index: s.finding_index,
                    webhook_finding: wi,
                    webhook: webhook.clone(),
                    service: service.clone(),
                    failing: failing.clone(),
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
            kind: RefusalKind::Final,
        },
        reason,
    )
}

/// A refusal made only because discovery failed at that moment.
fn refuse_until_discovery(finding_index: usize, reason: String) -> PlannedStep {
    let mut step = refuse(finding_index, reason);
    if let Action::Refuse { kind, .. } = &mut step.action {
        *kind = RefusalKind::DiscoveryFailed;
    }
    step
}

/// Why a step was refused, as far as anyone acts on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RefusalKind {
    /// On the evidence: asking again without a change gives the same.
    #[default]
    Final,
    /// Only because discovery failed at that moment (a CRD somewhere
    /// being created or removed): asked again once discovery answers.
    DiscoveryFailed,
}

impl RefusalKind {
    /// Whether it is the default (left out of JSON).
    pub fn is_final(&self) -> bool {
        *self == RefusalKind::Final
    }
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
    // One arm per variant: a planner is handed the facts of its own kind,
    // so none checks at run time what it was given.
    match &f.detail {
        FindingDetail::OrphanFinalizer(removal)
        | FindingDetail::NamespaceOrphanMetadataFinalizer(removal) => {
            finalizers::remove_finalizers(i, f, removal, snapshot, owners)
        }
        FindingDetail::LoadBalancerCleanupPending(lb) => {
            load_balancer::cleanup_pending(i, f, lb, snapshot, owners)
        }
        FindingDetail::WaitingOnLiveController(_) => finalizers::waiting_on_live_controller(i, f),
        FindingDetail::ProtectedFinalizerInUse { .. } => finalizers::protected_in_use(i, f),
        FindingDetail::UnknownFinalizerOwner(_) => finalizers::unknown_owner(i, f),
        FindingDetail::NamespaceBlockedByContent { .. } => namespace::blocked_by_content(i, f, all),
        FindingDetail::NamespaceBlockedByDiscovery { .. } => {
            namespace::blocked_by_discovery(i, f, all)
        }
        FindingDetail::DeadApiService(facts) => {
            apiservice::delete_api_service(i, f, facts, snapshot)
        }
        FindingDetail::ApiServiceUnavailable(facts) => {
            apiservice::unavailable(i, f, facts, snapshot)
        }
        FindingDetail::DeadWebhook(facts) => webhook::webhook_fail_open(i, facts, all, snapshot),
        FindingDetail::WebhookBackendFailing { .. } => webhook::backend_failing(i, f),
        FindingDetail::DeadConversionWebhook(facts) => {
            conversion::strategy_none(i, f, facts, snapshot)
        }
        FindingDetail::WaitingOnDependents { .. } => finalizers::waiting_on_dependents(i, f, all),
        FindingDetail::NamespaceContentDeletionFailed { .. } => {
            namespace::content_deletion_failed(i, f, all, snapshot)
        }
        FindingDetail::NamespaceSpecFinalizerStuck { .. } => {
            namespace::finalize_namespace(i, f, snapshot)
        }
        FindingDetail::PodNotStarting { .. } => pods::not_starting(i, f),
        FindingDetail::NamespaceNotProgressing(_) => namespace::not_progressing(i, f, all),
        FindingDetail::PodStuckTerminating { .. } => pods::stuck_terminating(i, f, all),
    }
}

fn related_findings(all: &[Finding], pred: impl Fn(&Finding) -> bool) -> String {
    let ids: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(_, g)| pred(g))
        .map(|(j, g)| format!("#{} {}", j + 1, g.kind()))
        .collect();
    if ids.is_empty() {
        String::new()
    } else {
        format!(" (see finding(s) {})", ids.join(", "))
    }
}

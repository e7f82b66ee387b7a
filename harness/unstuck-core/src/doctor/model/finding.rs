//! What the doctor found: one [`Finding`] per fact worth acting on (or
//! worth leaving alone), with the evidence that argues it, and the facts
//! findings carry ([`FindingDetail`] and what it holds).

use serde::{Deserialize, Serialize};

use super::finding_kind::FindingKind;
use super::load_balancer::LoadBalancerCleanup;
use super::namespace::{FinalizerCount, NamespaceStall, ResourceCount};
use super::object::ObjectRef;
use super::pull::ImagePull;
use super::service::ServiceKey;
use super::verdict::{FinalizerRemoval, FinalizerVerdict};
use super::webhook::WebhookConfigKind;

/// One diagnosis. Its kind is the variant of its [`FindingDetail`]
/// ([`Finding::kind`]): there is no separate kind to keep in step with the
/// facts.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The object it is about.
    pub subject: ObjectRef,
    /// One human line.
    pub summary: String,
    /// Quoted facts: condition messages, finalizer lists, ages, leases.
    pub evidence: Vec<String>,
    /// What kind of problem (or non-problem) this is, with the structured
    /// facts the planner uses.
    pub detail: FindingDetail,
}

impl Finding {
    /// What kind of problem (or non-problem) this is.
    pub fn kind(&self) -> FindingKind {
        self.detail.kind()
    }
}

/// Written as `{kind, subject, summary, evidence, detail}`: the kind is
/// read from the detail, so a reader need not look inside it. Read back
/// without `kind` (the detail's `type` says it).
impl Serialize for Finding {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("Finding", 5)?;
        out.serialize_field("kind", &self.kind())?;
        out.serialize_field("subject", &self.subject)?;
        out.serialize_field("summary", &self.summary)?;
        out.serialize_field("evidence", &self.evidence)?;
        out.serialize_field("detail", &self.detail)?;
        out.end()
    }
}

/// A finding's kind and the facts it carries: one variant per
/// [`FindingKind`], of the same name. Serialised with `type` set to that
/// name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum FindingDetail {
    /// [`FindingKind::OrphanFinalizer`].
    OrphanFinalizer(FinalizerRemoval),
    /// [`FindingKind::NamespaceOrphanMetadataFinalizer`].
    NamespaceOrphanMetadataFinalizer(FinalizerRemoval),
    /// [`FindingKind::LoadBalancerCleanupPending`].
    LoadBalancerCleanupPending(LoadBalancerCleanup),
    /// [`FindingKind::WaitingOnLiveController`].
    WaitingOnLiveController(FinalizerFacts),
    /// [`FindingKind::UnknownFinalizerOwner`].
    UnknownFinalizerOwner(FinalizerFacts),
    /// [`FindingKind::WaitingOnDependents`].
    WaitingOnDependents {
        /// Terminating dependents with `blockOwnerDeletion` on the subject.
        dependents: Vec<ObjectRef>,
        /// Where the chain ends: dependents that wait on nothing of their
        /// own (their findings say what holds them).
        leaves: Vec<ObjectRef>,
    },
    /// [`FindingKind::ProtectedFinalizerInUse`].
    ProtectedFinalizerInUse {
        /// The protection finalizer.
        finalizer: String,
        /// Who uses the object (pods by `namespace/name`, or the claim a
        /// volume is bound to).
        used_by: Vec<String>,
    },
    /// [`FindingKind::NamespaceBlockedByContent`].
    NamespaceBlockedByContent {
        /// Parsed from `NamespaceContentRemaining`.
        remaining_resources: Vec<ResourceCount>,
        /// Parsed from `NamespaceFinalizersRemaining`.
        remaining_finalizers: Vec<FinalizerCount>,
        /// Objects in the namespace that are being deleted and still carry
        /// finalizers.
        blocking_objects: Vec<ObjectRef>,
    },
    /// [`FindingKind::NamespaceBlockedByDiscovery`].
    NamespaceBlockedByDiscovery {
        /// Parsed from `NamespaceDeletionDiscoveryFailure`.
        group_versions: Vec<String>,
        /// The APIServices serving them (`<version>.<group>`).
        api_services: Vec<String>,
        /// Those of them that are also [`FindingKind::DeadApiService`].
        dead_api_services: Vec<String>,
    },
    /// [`FindingKind::DeadApiService`].
    DeadApiService(ApiServiceFacts),
    /// [`FindingKind::ApiServiceUnavailable`].
    ApiServiceUnavailable(ApiServiceFacts),
    /// [`FindingKind::DeadWebhook`].
    DeadWebhook(DeadWebhookFacts),
    /// [`FindingKind::DeadConversionWebhook`].
    DeadConversionWebhook(ConversionWebhookFacts),
    /// [`FindingKind::NamespaceContentDeletionFailed`].
    NamespaceContentDeletionFailed {
        /// The condition's message as the controller wrote it.
        message: String,
        /// Webhooks the message names (`failed calling webhook "<name>"`).
        webhooks: Vec<String>,
    },
    /// [`FindingKind::NamespaceSpecFinalizerStuck`].
    NamespaceSpecFinalizerStuck {
        /// `spec.finalizers` as seen.
        tokens: Vec<String>,
        /// The tokens nothing will remove by itself.
        stuck_tokens: Vec<String>,
        /// What the snapshot still shows in the namespace (`kind/name`),
        /// plus failing content conditions.
        content_remaining: Vec<String>,
        /// Whether discovery was complete, so that an empty content list
        /// proves the namespace is empty.
        discovery_complete: bool,
        /// `metadata.resourceVersion`.
        resource_version: Option<String>,
    },
    /// [`FindingKind::PodStuckTerminating`].
    PodStuckTerminating {
        /// `spec.nodeName`.
        node: Option<String>,
        /// `status.phase`.
        phase: Option<String>,
        /// Seconds since the deletionTimestamp (which already includes the
        /// grace period).
        overdue_seconds: i64,
        /// What the evidence points at.
        hint: PodStuckHint,
    },
    /// [`FindingKind::PodNotStarting`].
    PodNotStarting {
        /// `spec.nodeName`, when scheduled.
        node: Option<String>,
        /// `status.phase`.
        phase: Option<String>,
        /// Seconds since the pod was created.
        age_seconds: i64,
        /// What the evidence points at.
        cause: PodStartCause,
        /// For [`PodStartCause::ImagePull`]: which image, and what the
        /// registry did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pull: Option<ImagePull>,
    },
    /// [`FindingKind::NamespaceNotProgressing`].
    NamespaceNotProgressing(NamespaceStall),
    /// [`FindingKind::WebhookBackendFailing`].
    WebhookBackendFailing {
        configuration: WebhookConfigKind,
        configuration_name: String,
        webhook: String,
        /// The Service it calls; `None` for a `url` webhook.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        service: Option<ServiceKey>,
        /// `slow`, `misconfigured: TLS`, `misconfigured: HTTP error`,
        /// `misconfigured: bad review`.
        verdict: String,
        /// The apiserver's words that show it.
        quote: String,
        /// The call's timeout as the apiserver sent it (`?timeout=5s`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout: Option<String>,
        /// Terminating namespaces whose content deletes it fails.
        blocks_namespaces: Vec<String>,
        /// Writes that would release stuck objects and that it matches:
        /// each fails (slowly, for a backend that hangs) while the backend
        /// is as it is ([`crate::doctor::rejected`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        rejects: Vec<RejectedWrite>,
    },
}

/// A fail-closed webhook whose backend is proven gone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadWebhookFacts {
    /// Where the webhook is configured.
    pub configuration: WebhookConfigKind,
    /// The configuration's name.
    pub configuration_name: String,
    /// The webhook's position in `webhooks`.
    pub index: usize,
    /// The webhook's name.
    pub webhook: String,
    /// `failurePolicy` as seen (`Fail`).
    pub failure_policy: String,
    /// The Service it calls.
    pub service: ServiceKey,
    /// Why the backend counts as gone: `ServiceNotFound` or
    /// `NoReadyEndpoints`.
    pub backend: String,
    /// Its rules in one line.
    pub rules: String,
    /// Terminating namespaces whose content deletion fails because of
    /// it (their `NamespaceDeletionContentFailure` names it).
    pub blocks_namespaces: Vec<String>,
    /// The writes that would release stuck objects (a finalizer
    /// removed, a namespace finalized) that it rejects
    /// ([`crate::doctor::rejected`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejects: Vec<RejectedWrite>,
}

/// A CRD whose conversion webhook's backend is proven gone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionWebhookFacts {
    /// The CRD's name (`<plural>.<group>`).
    pub crd: String,
    /// `spec.group`.
    pub group: String,
    /// `spec.names.kind`.
    pub kind: String,
    /// The Service its conversion webhook calls.
    pub service: ServiceKey,
    /// Why the backend counts as gone: `ServiceNotFound` or
    /// `NoReadyEndpoints`.
    pub backend: String,
    /// `spec.versions`, storage version first.
    pub versions: Vec<String>,
    /// `status.storedVersions`.
    pub stored_versions: Vec<String>,
    /// Terminating namespaces whose deletion-failure condition quotes
    /// this CRD's conversion failing.
    pub blocks_namespaces: Vec<String>,
    /// The collector's own lists of the type that failed on it
    /// (`<group>/<version>: <message>`).
    pub failed_lists: Vec<String>,
    /// Whether strategy `None` is proven lossless
    /// ([`crate::doctor::conversion::strategy_none_proof`]).
    pub no_schema_difference: bool,
}

/// What an unavailable aggregated APIService shows, dead or not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceFacts {
    /// `Available` condition reason.
    pub reason: String,
    /// `Available` condition message.
    pub message: String,
    /// `Available` condition status (`False` or `Unknown`).
    pub status: String,
    /// `spec.service` as `namespace/name`.
    pub service: String,
    /// The group/version it serves.
    pub group_version: String,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// Terminating namespaces whose deletion it blocks (their
    /// discovery-failure condition names its group/version).
    pub blocks_namespaces: Vec<String>,
    /// For a backend installed but not serving (its Service there, no
    /// ready endpoint, a pod's cause named): how long it has not
    /// served, the bound and whether a person allowed the removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outage: Option<Outage>,
}

/// The finalizers a finding about a live or unjudged owner concerns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalizerFacts {
    /// Plural resource name of the subject.
    pub resource: String,
    /// Seconds since the subject's deletionTimestamp.
    pub age_seconds: i64,
    /// The finalizers this finding is about, with the verdict on each.
    pub verdicts: Vec<FinalizerVerdict>,
}

impl FindingDetail {
    /// The kind this detail is the facts of.
    pub fn kind(&self) -> FindingKind {
        match self {
            FindingDetail::DeadApiService(_) => FindingKind::DeadApiService,
            FindingDetail::ApiServiceUnavailable(_) => FindingKind::ApiServiceUnavailable,
            FindingDetail::DeadWebhook { .. } => FindingKind::DeadWebhook,
            FindingDetail::WebhookBackendFailing { .. } => FindingKind::WebhookBackendFailing,
            FindingDetail::DeadConversionWebhook { .. } => FindingKind::DeadConversionWebhook,
            FindingDetail::NamespaceBlockedByDiscovery { .. } => {
                FindingKind::NamespaceBlockedByDiscovery
            }
            FindingDetail::NamespaceContentDeletionFailed { .. } => {
                FindingKind::NamespaceContentDeletionFailed
            }
            FindingDetail::OrphanFinalizer(_) => FindingKind::OrphanFinalizer,
            FindingDetail::LoadBalancerCleanupPending(_) => FindingKind::LoadBalancerCleanupPending,
            FindingDetail::NamespaceBlockedByContent { .. } => {
                FindingKind::NamespaceBlockedByContent
            }
            FindingDetail::NamespaceOrphanMetadataFinalizer(_) => {
                FindingKind::NamespaceOrphanMetadataFinalizer
            }
            FindingDetail::NamespaceSpecFinalizerStuck { .. } => {
                FindingKind::NamespaceSpecFinalizerStuck
            }
            FindingDetail::PodStuckTerminating { .. } => FindingKind::PodStuckTerminating,
            FindingDetail::PodNotStarting { .. } => FindingKind::PodNotStarting,
            FindingDetail::NamespaceNotProgressing(_) => FindingKind::NamespaceNotProgressing,
            FindingDetail::UnknownFinalizerOwner(_) => FindingKind::UnknownFinalizerOwner,
            FindingDetail::WaitingOnLiveController(_) => FindingKind::WaitingOnLiveController,
            FindingDetail::WaitingOnDependents { .. } => FindingKind::WaitingOnDependents,
            FindingDetail::ProtectedFinalizerInUse { .. } => FindingKind::ProtectedFinalizerInUse,
        }
    }

    /// The facts of an APIService finding, dead or not.
    pub fn api_service(&self) -> Option<&ApiServiceFacts> {
        match self {
            FindingDetail::DeadApiService(a) | FindingDetail::ApiServiceUnavailable(a) => Some(a),
            _ => None,
        }
    }

    /// The finalizer removal of an orphan-finalizer finding, on an object
    /// or on a namespace's metadata.
    pub fn finalizer_removal(&self) -> Option<&FinalizerRemoval> {
        match self {
            FindingDetail::OrphanFinalizer(r)
            | FindingDetail::NamespaceOrphanMetadataFinalizer(r) => Some(r),
            _ => None,
        }
    }

    /// The finalizers of a finding about a live or unjudged owner.
    pub fn finalizer_facts(&self) -> Option<&FinalizerFacts> {
        match self {
            FindingDetail::WaitingOnLiveController(f) | FindingDetail::UnknownFinalizerOwner(f) => {
                Some(f)
            }
            _ => None,
        }
    }
}

/// Why a pod does not start, as its status and events show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PodStartCause {
    /// `PodScheduled=False`: no node fits (resources, selectors, taints).
    Unschedulable,
    /// `ErrImagePull`, `ImagePullBackOff`, `ErrImageNeverPull` or
    /// `InvalidImageName`.
    ImagePull,
    /// `ImageInspectError`: the image is on the node but unreadable.
    ImageInspect,
    /// `CreateContainerConfigError` (a missing ConfigMap/Secret key, ...),
    /// `CreateContainerError`, `RunContainerError`, `PreStartHookError`.
    ContainerConfig,
    /// `CrashLoopBackOff`: it starts, exits, and is restarted with backoff.
    CrashLoop,
    /// `FailedMount` / `FailedAttachVolume` events: stuck in
    /// ContainerCreating on its volumes.
    VolumeMount,
    /// `FailedCreatePodSandBox` events: the runtime or CNI cannot create
    /// its sandbox.
    Sandbox,
    /// Pending with nothing in the API that says why.
    Unknown,
}

impl PodStartCause {
    /// One line for the summary: what is wrong and where to look.
    pub fn explain(self) -> &'static str {
        match self {
            PodStartCause::Unschedulable => {
                "no node fits it (the scheduler's message says which predicate fails: resources, node selector or affinity, taints)"
            }
            PodStartCause::ImagePull => {
                "its image cannot be pulled (check the image name, the registry and pull secrets, or imagePullPolicy)"
            }
            PodStartCause::ImageInspect => {
                "its image is on the node but cannot be inspected (a corrupt image or runtime storage: remove and pull it again)"
            }
            PodStartCause::ContainerConfig => {
                "its container cannot be created from its spec (a missing ConfigMap/Secret or key, a bad command or hook)"
            }
            PodStartCause::CrashLoop => {
                "it starts and exits again and again (read the last run's logs and exit code)"
            }
            PodStartCause::VolumeMount => {
                "its volumes cannot be mounted (a missing ConfigMap/Secret/claim, or a volume plugin failing on the node)"
            }
            PodStartCause::Sandbox => {
                "its sandbox cannot be created (the container runtime or the CNI plugin on the node fails)"
            }
            PodStartCause::Unknown => {
                "it is still Pending and the API says nothing about why; look at the kubelet on its node"
            }
        }
    }
}

/// What a stuck pod's evidence points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PodStuckHint {
    /// Phase is terminal and every container terminated: the kubelet is
    /// stuck tearing down volumes (catalog case 4).
    VolumeTeardown,
    /// Containers still running past grace, or `FailedKillPod` events: the
    /// runtime cannot stop them (catalog case 5).
    RuntimeKill,
    /// `status.reason` is `NodeLost`, or the pod is not scheduled anywhere
    /// the kubelet could confirm from.
    NodeLost,
    /// `FailedKillPod` events quote the network plugin failing to tear
    /// down the pod's sandbox (`failed to destroy network for sandbox`):
    /// the runtime is healthy, the CNI plugin (or what it needs) is not.
    NetworkTeardown,
    /// Phase is terminal and every container terminated, and an admission
    /// webhook that matches pod DELETE fails closed with its backend gone:
    /// the kubelet's final DELETE is rejected (kyverno/kyverno#2750).
    DeleteRejected,
    /// Nothing conclusive in the API.
    Unknown,
}

/// How long an APIService's installed backend has not served, judged
/// against `--apiservice-outage-after`: past that bound, with its cause
/// named and a Terminating namespace blocked, its registration may be
/// removed, but only when a person named it (`--allow-apiservice-removal`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outage {
    /// The `Available` condition's lastTransitionTime (RFC 3339).
    pub since: String,
    /// Seconds from `since` to the snapshot, by the API server's clock.
    pub lasted_secs: i64,
    /// The bound (`--apiservice-outage-after`), in seconds.
    pub bound_secs: i64,
    /// Why the backend does not serve, at its root (a pod's cause).
    pub cause: String,
    /// Whether `--allow-apiservice-removal` named this APIService.
    pub removal_allowed: bool,
}

impl Outage {
    /// Whether it has lasted at least the bound.
    pub fn sustained(&self) -> bool {
        self.lasted_secs >= self.bound_secs
    }
}

/// A write a stuck object's release needs, rejected by a webhook that
/// fails closed with its backend gone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RejectedWrite {
    /// The stuck object.
    pub subject: ObjectRef,
    /// `UPDATE`.
    pub operation: String,
    /// `resource[/subresource]` as the webhook's rules name it.
    pub resource: String,
    /// What the write is for, e.g. `removing its finalizers`.
    pub purpose: String,
    /// Set when the match rests on what could not be evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumed: Option<String>,
}

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

/// One diagnosis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// What kind of problem (or non-problem) this is.
    pub kind: FindingKind,
    /// The object it is about.
    pub subject: ObjectRef,
    /// One human line.
    pub summary: String,
    /// Quoted facts: condition messages, finalizer lists, ages, leases.
    pub evidence: Vec<String>,
    /// Structured facts the planner uses.
    pub detail: FindingDetail,
}

/// Structured facts per finding kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum FindingDetail {
    /// For [`FindingKind::OrphanFinalizer`] and
    /// [`FindingKind::NamespaceOrphanMetadataFinalizer`].
    OrphanFinalizer(FinalizerRemoval),
    /// For [`FindingKind::LoadBalancerCleanupPending`].
    LoadBalancerCleanup(LoadBalancerCleanup),
    /// For [`FindingKind::WaitingOnLiveController`] and
    /// [`FindingKind::UnknownFinalizerOwner`]: the finalizers concerned and
    /// the verdict on each.
    Finalizers {
        /// Plural resource name of the subject.
        resource: String,
        /// Seconds since the subject's deletionTimestamp.
        age_seconds: i64,
        /// The finalizers this finding is about.
        verdicts: Vec<FinalizerVerdict>,
    },
    /// For [`FindingKind::WaitingOnDependents`].
    Dependents {
        /// Terminating dependents with `blockOwnerDeletion` on the subject.
        dependents: Vec<ObjectRef>,
        /// Where the chain ends: dependents that wait on nothing of their
        /// own (their findings say what holds them).
        leaves: Vec<ObjectRef>,
    },
    /// For [`FindingKind::ProtectedFinalizerInUse`].
    Protected {
        /// The protection finalizer.
        finalizer: String,
        /// Who uses the object (pods by `namespace/name`, or the claim a
        /// volume is bound to).
        used_by: Vec<String>,
    },
    /// For [`FindingKind::NamespaceBlockedByContent`].
    NamespaceContent {
        /// Parsed from `NamespaceContentRemaining`.
        remaining_resources: Vec<ResourceCount>,
        /// Parsed from `NamespaceFinalizersRemaining`.
        remaining_finalizers: Vec<FinalizerCount>,
        /// Objects in the namespace that are being deleted and still carry
        /// finalizers.
        blocking_objects: Vec<ObjectRef>,
    },
    /// For [`FindingKind::NamespaceBlockedByDiscovery`].
    NamespaceDiscovery {
        /// Parsed from `NamespaceDeletionDiscoveryFailure`.
        group_versions: Vec<String>,
        /// The APIServices serving them (`<version>.<group>`).
        api_services: Vec<String>,
        /// Those of them that are also [`FindingKind::DeadApiService`].
        dead_api_services: Vec<String>,
    },
    /// For [`FindingKind::DeadApiService`].
    ApiService {
        /// `Available` condition reason.
        reason: String,
        /// `Available` condition message.
        message: String,
        /// `Available` condition status (`False` or `Unknown`).
        status: String,
        /// `spec.service` as `namespace/name`.
        service: String,
        /// The group/version it serves.
        group_version: String,
        /// `metadata.resourceVersion`.
        resource_version: Option<String>,
        /// Terminating namespaces whose deletion it blocks (their
        /// discovery-failure condition names its group/version).
        blocks_namespaces: Vec<String>,
        /// For a backend installed but not serving (its Service there, no
        /// ready endpoint, a pod's cause named): how long it has not
        /// served, the bound and whether a person allowed the removal.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outage: Option<Outage>,
    },
    /// For [`FindingKind::DeadWebhook`].
    Webhook {
        /// Where the webhook is configured.
        configuration: WebhookConfigKind,
        /// The configuration's name.
        configuration_name: String,
        /// The webhook's position in `webhooks`.
        index: usize,
        /// The webhook's name.
        webhook: String,
        /// `failurePolicy` as seen (`Fail`).
        failure_policy: String,
        /// The Service it calls.
        service: ServiceKey,
        /// Why the backend counts as gone: `ServiceNotFound` or
        /// `NoReadyEndpoints`.
        backend: String,
        /// Its rules in one line.
        rules: String,
        /// Terminating namespaces whose content deletion fails because of
        /// it (their `NamespaceDeletionContentFailure` names it).
        blocks_namespaces: Vec<String>,
        /// The writes that would release stuck objects (a finalizer
        /// removed, a namespace finalized) that it rejects
        /// ([`crate::doctor::rejected`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        rejects: Vec<RejectedWrite>,
    },
    /// For [`FindingKind::DeadConversionWebhook`].
    ConversionWebhook {
        /// The CRD's name (`<plural>.<group>`).
        crd: String,
        /// `spec.group`.
        group: String,
        /// `spec.names.kind`.
        kind: String,
        /// The Service its conversion webhook calls.
        service: ServiceKey,
        /// Why the backend counts as gone: `ServiceNotFound` or
        /// `NoReadyEndpoints`.
        backend: String,
        /// `spec.versions`, storage version first.
        versions: Vec<String>,
        /// `status.storedVersions`.
        stored_versions: Vec<String>,
        /// Terminating namespaces whose deletion-failure condition quotes
        /// this CRD's conversion failing.
        blocks_namespaces: Vec<String>,
        /// The collector's own lists of the type that failed on it
        /// (`<group>/<version>: <message>`).
        failed_lists: Vec<String>,
        /// Whether strategy `None` is proven lossless
        /// ([`crate::doctor::conversion::strategy_none_proof`]).
        no_schema_difference: bool,
    },
    /// For [`FindingKind::NamespaceContentDeletionFailed`].
    NamespaceContentFailure {
        /// The condition's message as the controller wrote it.
        message: String,
        /// Webhooks the message names (`failed calling webhook "<name>"`).
        webhooks: Vec<String>,
    },
    /// For [`FindingKind::NamespaceSpecFinalizerStuck`].
    NamespaceSpec {
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
    /// For [`FindingKind::PodStuckTerminating`].
    Pod {
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
    /// For [`FindingKind::PodNotStarting`].
    PodStart {
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
    /// For [`FindingKind::NamespaceNotProgressing`].
    NamespaceStall(NamespaceStall),
    /// For [`FindingKind::WebhookBackendFailing`].
    FailingWebhook {
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

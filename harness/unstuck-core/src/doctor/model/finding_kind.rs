//! The kinds of finding and their names, which scenario files and reports
//! use.

use serde::{Deserialize, Serialize};

use crate::text::quoted;

/// The kinds of finding. Serialised as these PascalCase names, which
/// scenario files use to state what the doctor is expected to find.
///
/// The declaration order is the report order: root causes that need a
/// remedy first, then what blocks on them, then what is fine as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FindingKind {
    /// An aggregated APIService whose `Available` condition is not `True`
    /// and whose backend the collector's lookup of its Service proves gone
    /// ([`crate::doctor::backend::judge`]). Never for local APIServices (no
    /// `spec.service`).
    DeadApiService,
    /// An aggregated APIService that is unavailable while its backend is
    /// not proven gone by a lookup of its Service (whatever the
    /// aggregator's reason): reported, never changed ([`crate::doctor::apiservice`]).
    ApiServiceUnavailable,
    /// An admission webhook with `failurePolicy: Fail` whose backend is
    /// proven gone ([`crate::doctor::backend::judge`]: its Service does not exist,
    /// or selects pods and has had no ready endpoint, sustained, while none
    /// restarts): every operation it matches is rejected. Never for URL
    /// webhooks, `ExternalName` or selectorless Services, or
    /// `failurePolicy: Ignore`.
    DeadWebhook,
    /// An admission webhook with `failurePolicy: Fail` whose backend is
    /// there but fails the apiserver's calls, as the apiserver's own error
    /// shows ([`crate::doctor::backend::classify`]): it hangs past the timeout, or
    /// answers wrongly (TLS that does not verify, an HTTP error, a bad
    /// review). Never called gone, never failed open: the advice is to
    /// repair it.
    WebhookBackendFailing,
    /// A CustomResourceDefinition whose conversion webhook's backend is
    /// proven gone ([`crate::doctor::backend::judge`] on its Service): every read
    /// of its objects in another version than the one each is stored in
    /// fails, the namespace controller's among them, so namespaces holding
    /// such objects (and lists of the type cluster-wide) fail on it
    /// ([`crate::doctor::conversion`]). Never for URL webhooks.
    DeadConversionWebhook,
    /// A Terminating namespace whose deletion is blocked because discovery
    /// of some group/versions fails (`NamespaceDeletionDiscoveryFailure`).
    NamespaceBlockedByDiscovery,
    /// A Terminating namespace whose content the namespace controller
    /// fails to delete (`NamespaceDeletionContentFailure`), e.g. because a
    /// webhook rejects the deletes.
    NamespaceContentDeletionFailed,
    /// An object past the stuck threshold whose remaining finalizers
    /// include keys with no live owner (argued by
    /// [`crate::doctor::owner::finalizer_owner`]).
    OrphanFinalizer,
    /// A Service being deleted that holds
    /// `service.kubernetes.io/load-balancer-cleanup`: only a cloud
    /// controller manager removes it, once the cloud's load balancer is
    /// deleted ([`crate::doctor::model::load_balancer`]). Its owner is judged by
    /// the cloud controller manager's lease and the service controller's
    /// events; removed only when that owner is shown (or assumed) dead,
    /// and the plan names the load balancer a removal leaves in the cloud.
    LoadBalancerCleanupPending,
    /// A Terminating namespace that still has content
    /// (`NamespaceContentRemaining` / `NamespaceFinalizersRemaining`, or
    /// terminating objects with finalizers seen in it).
    NamespaceBlockedByContent,
    /// A Terminating namespace's own `metadata.finalizers` holds keys with
    /// no live owner (left by a removed product).
    NamespaceOrphanMetadataFinalizer,
    /// A Terminating namespace's `spec.finalizers` holds a token nothing
    /// will remove by itself: a token other than `kubernetes` (it has no
    /// handler), or `kubernetes` when the namespace controller is not
    /// known to be alive or has not finished long after the content went.
    NamespaceSpecFinalizerStuck,
    /// A pod past its grace period (plus the threshold) that the kubelet has
    /// not finished deleting. Node-level; the API doctor only explains it.
    PodStuckTerminating,
    /// A pod, not being deleted, that has not started past the threshold:
    /// unschedulable, its image cannot be had or inspected, its container
    /// cannot be created from its spec, its volumes cannot be mounted, its
    /// sandbox cannot be created, or it crashes in a loop (seed 004's
    /// Pending / ContainerCreating / ImagePullBackOff / ImageInspectError /
    /// CrashLoopBackOff). Explained with evidence, never remedied.
    PodNotStarting,
    /// A Terminating namespace past the threshold that no other finding
    /// explains, or that the namespace controller has written no condition
    /// on: says why the controller is not progressing. Report only.
    NamespaceNotProgressing,
    /// A finalizer whose owner could not be argued alive or dead.
    UnknownFinalizerOwner,
    /// A finalizer whose controller is alive: leave it alone.
    WaitingOnLiveController,
    /// An owner in foreground deletion (`foregroundDeletion`) whose
    /// dependents with `blockOwnerDeletion` are stuck: the remedy is at the
    /// leaves of the chain, never on the owner.
    WaitingOnDependents,
    /// `kubernetes.io/pvc-protection` on a claim a pod still uses, or
    /// `kubernetes.io/pv-protection` on a bound volume: normal, never
    /// stripped.
    ProtectedFinalizerInUse,
}

impl FindingKind {
    /// Every kind, in report order.
    pub const ALL: [FindingKind; 19] = [
        FindingKind::DeadApiService,
        FindingKind::ApiServiceUnavailable,
        FindingKind::DeadWebhook,
        FindingKind::WebhookBackendFailing,
        FindingKind::DeadConversionWebhook,
        FindingKind::NamespaceBlockedByDiscovery,
        FindingKind::NamespaceContentDeletionFailed,
        FindingKind::OrphanFinalizer,
        FindingKind::LoadBalancerCleanupPending,
        FindingKind::NamespaceBlockedByContent,
        FindingKind::NamespaceOrphanMetadataFinalizer,
        FindingKind::NamespaceSpecFinalizerStuck,
        FindingKind::PodStuckTerminating,
        FindingKind::PodNotStarting,
        FindingKind::NamespaceNotProgressing,
        FindingKind::UnknownFinalizerOwner,
        FindingKind::WaitingOnLiveController,
        FindingKind::WaitingOnDependents,
        FindingKind::ProtectedFinalizerInUse,
    ];

    /// The serialised name, e.g. `OrphanFinalizer`.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::DeadApiService => "DeadApiService",
            FindingKind::ApiServiceUnavailable => "ApiServiceUnavailable",
            FindingKind::DeadWebhook => "DeadWebhook",
            FindingKind::WebhookBackendFailing => "WebhookBackendFailing",
            FindingKind::DeadConversionWebhook => "DeadConversionWebhook",
            FindingKind::NamespaceBlockedByDiscovery => "NamespaceBlockedByDiscovery",
            FindingKind::NamespaceContentDeletionFailed => "NamespaceContentDeletionFailed",
            FindingKind::OrphanFinalizer => "OrphanFinalizer",
            FindingKind::LoadBalancerCleanupPending => "LoadBalancerCleanupPending",
            FindingKind::NamespaceBlockedByContent => "NamespaceBlockedByContent",
            FindingKind::NamespaceOrphanMetadataFinalizer => "NamespaceOrphanMetadataFinalizer",
            FindingKind::NamespaceSpecFinalizerStuck => "NamespaceSpecFinalizerStuck",
            FindingKind::PodStuckTerminating => "PodStuckTerminating",
            FindingKind::PodNotStarting => "PodNotStarting",
            FindingKind::NamespaceNotProgressing => "NamespaceNotProgressing",
            FindingKind::UnknownFinalizerOwner => "UnknownFinalizerOwner",
            FindingKind::WaitingOnLiveController => "WaitingOnLiveController",
            FindingKind::WaitingOnDependents => "WaitingOnDependents",
            FindingKind::ProtectedFinalizerInUse => "ProtectedFinalizerInUse",
        }
    }
}

impl std::fmt::Display for FindingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for FindingKind {
    type Err = UnknownFindingKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FindingKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownFindingKind(s.to_owned()))
    }
}

/// A name that is not a [`FindingKind`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown finding kind {} (known: {known})", quoted(.0), known = known_kinds())]
pub struct UnknownFindingKind(pub String);

fn known_kinds() -> String {
    FindingKind::ALL.map(FindingKind::as_str).join(", ")
}

//! What the node doctor reads from kubelet log lines: the events it acts
//! on ([`KubeletEvent`]) and their parts.

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::Severity;

/// Which volume operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VolumeFailureKind {
    /// `UnmountVolume.TearDown failed`: the volume plugin's TearDown (for
    /// an emptyDir, removing its directory; for a mounted volume, umount).
    TearDown,
    /// `error cleaning subPath mounts`: the subPath bind mounts under
    /// `volume-subpaths/` could not be removed (seed 004).
    SubPathCleanup,
}

/// The runtime (CRI) call a `... from runtime service failed` line names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RuntimeCall {
    StopContainer,
    StopPodSandbox,
    RemoveContainer,
    RemovePodSandbox,
    Other(String),
}

/// The kubelet's pod sync loop operations (`SyncLoop DELETE` etc.).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SyncLoopOp {
    Add,
    Update,
    Delete,
    Remove,
    Reconcile,
}

/// One failed step of a pod sync, as `PodSyncResult.Error` prints it:
/// `failed to "KillContainer" for "c" with KillContainerError: "rpc error: ..."`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncFailure {
    /// `KillContainer`, `KillPodSandbox`, `StartContainer`, ...
    pub action: String,
    /// The container name, or the pod UID for sandbox actions.
    pub target: String,
    /// `KillContainerError`, `KillPodSandboxError`, ...
    pub reason: String,
    /// The runtime's error, unquoted.
    pub message: String,
}

impl SyncFailure {
    /// Whether this is a failure to stop something (catalog case 5).
    pub fn is_kill(&self) -> bool {
        self.action == "KillContainer" || self.action == "KillPodSandbox"
    }
}

/// What a kubelet log line says, for the lines the node doctor acts on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum KubeletEvent {
    /// A volume could not be torn down; the kubelet retries after
    /// `retry_at` (backoff doubling from 500 ms to 2m2s).
    VolumeTearDownFailed {
        kind: VolumeFailureKind,
        /// The volume's name in the pod spec (`OuterVolumeSpecName`).
        volume: String,
        /// `kubernetes.io/empty-dir/<uid>-<volume>` and the like.
        unique_name: String,
        pod_uid: String,
        /// The plugin's error, e.g. `unlinkat <path>: device or resource busy`.
        error: String,
        /// `No retries permitted until ...`, when it parsed.
        retry_at: Option<Timestamp>,
        /// `durationBeforeRetry`, as printed (`500ms`, `2m2s`).
        retry_after: Option<String>,
    },
    /// A volume was torn down: a prior failure for it is resolved.
    VolumeTearDownSucceeded {
        volume: String,
        unique_name: String,
        pod_uid: String,
    },
    /// `Killing container with a grace period`: the kubelet started to stop a container.
    KillingContainer {
        pod: Option<String>,
        pod_uid: Option<String>,
        container: Option<String>,
        container_id: Option<String>,
        grace_period: Option<i64>,
    },
    /// `Kill container failed`: stopping one container failed.
    KillContainerFailed {
        pod: Option<String>,
        pod_uid: Option<String>,
        container: Option<String>,
        container_id: Option<String>,
        error: String,
    },
    /// `Error syncing pod, skipping` (or the `FailedKillPod` event text):
    /// the pod sync's failed steps.
    SyncFailed {
        pod: Option<String>,
        pod_uid: Option<String>,
        failures: Vec<SyncFailure>,
    },
    /// `StopContainer from runtime service failed` and the like: a CRI
    /// call by container or sandbox ID.
    RuntimeCallFailed {
        call: RuntimeCall,
        id: String,
        error: String,
    },
    /// The kubelet's sync loop saw the pod change; `Remove` after the final
    /// delete is the kubelet finishing the pod itself.
    SyncLoop { op: SyncLoopOp, pods: Vec<String> },
    /// `Cleaned up orphaned pod volumes dir`: the pod's volumes dir is gone.
    OrphanVolumesCleaned { pod_uid: String, path: String },
    /// `orphaned pod "<uid>" found, but volume paths are still present on
    /// disk`: a pod deleted (often forced) while its volumes stayed.
    OrphanVolumePathsPresent { pod_uid: String },
}

impl KubeletEvent {
    /// Whether the event is about the pod with this UID, `ns/name`, or one
    /// of these container/sandbox IDs.
    pub fn concerns(&self, uid: &str, pod: &str, ids: &[String]) -> bool {
        let is_pod = |p: &Option<String>, u: &Option<String>| {
            u.as_deref() == Some(uid) || p.as_deref() == Some(pod)
        };
        match self {
            KubeletEvent::VolumeTearDownFailed { pod_uid, .. }
            | KubeletEvent::VolumeTearDownSucceeded { pod_uid, .. }
            | KubeletEvent::OrphanVolumesCleaned { pod_uid, .. }
            | KubeletEvent::OrphanVolumePathsPresent { pod_uid } => pod_uid == uid,
            KubeletEvent::KillingContainer {
                pod,
                pod_uid,
                container_id,
                ..
            }
            | KubeletEvent::KillContainerFailed {
                pod,
                pod_uid,
                container_id,
                ..
            } => {
                is_pod(pod, pod_uid)
                    || container_id
                        .as_deref()
                        .is_some_and(|c| ids.iter().any(|i| i == c))
            }
            KubeletEvent::SyncFailed { pod, pod_uid, .. } => is_pod(pod, pod_uid),
            KubeletEvent::RuntimeCallFailed { id, .. } => ids.iter().any(|i| i == id),
            KubeletEvent::SyncLoop { pods, .. } => pods
                .iter()
                .any(|p| p == pod || p.contains(&format!("({uid})"))),
        }
    }
}

/// One kubelet log line the doctor understood.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletLogEntry {
    pub severity: Severity,
    /// `mmdd hh:mm:ss.uuuuuu` from the klog header.
    pub time: String,
    pub event: KubeletEvent,
    /// The line as logged, for evidence.
    pub raw: String,
}

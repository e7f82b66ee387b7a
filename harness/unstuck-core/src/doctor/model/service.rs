//! The Services behind webhooks and APIServices, as the collector looked
//! them up: which Service ([`ServiceKey`]), what the lookup found
//! ([`ServiceLookup`]), each read of its EndpointSlices ([`EndpointRead`])
//! and the pods its selector matches ([`BackendPod`]). Whether that proves
//! a backend gone is [`crate::doctor::backend`]'s to judge.

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The Service a webhook calls.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceKey {
    /// Namespace of the Service.
    pub namespace: String,
    /// Name of the Service.
    pub name: String,
}

impl std::fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What the collector found when it looked up a webhook's or an
/// APIService's Service; [`crate::doctor::backend::judge`] reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceLookup {
    /// The Service looked up.
    pub service: ServiceKey,
    /// Whether `GET` returned it (a 404 is `false`).
    pub exists: bool,
    /// Ready endpoints over its EndpointSlices at the last read; `None`
    /// when the Service does not exist or the slices could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_endpoints: Option<u32>,
    /// Why the lookup itself failed (neither found nor a 404): no proof
    /// either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// (Added) `spec.type` (`ClusterIP`, `ExternalName`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_type: Option<String>,
    /// (Added) `spec.externalName`, for an `ExternalName` Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_name: Option<String>,
    /// (Added) Whether `spec.selector` selects pods; `false`: endpoints
    /// are maintained by hand. `None`: not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_selector: Option<bool>,
    /// (Added) The selector as `k=v,...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// (Added) Each read of its EndpointSlices, in order; a second one
    /// [`crate::doctor::backend::SUSTAINED`] later when the first found none ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<EndpointRead>,
    /// (Added) The pods its selector matches, read with the last read;
    /// `None` when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<Vec<BackendPod>>,
    /// (Added) Why the pods could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_error: Option<String>,
}

/// One read of a Service's EndpointSlices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointRead {
    /// When the list returned.
    pub at: Timestamp,
    /// EndpointSlices labelled for the Service.
    pub slices: u32,
    /// Endpoints whose `ready` is true or unset (the API's rule).
    pub ready: u32,
    /// Endpoints listed with `ready: false`.
    pub not_ready: u32,
}

/// What the doctor keeps of a pod the Service's selector matches: enough
/// to tell a backend coming back from one that is gone. Read from a pod,
/// and judged, in [`crate::doctor::backend`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendPod {
    pub name: String,
    /// `status.phase`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// `metadata.deletionTimestamp` is set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
    /// Its `Ready` condition is `True`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ready: bool,
    /// The latest `state.running.startedAt` of its containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_started: Option<Timestamp>,
    /// The latest `lastState.terminated.finishedAt` of its containers:
    /// when a container last exited before a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_restart: Option<Timestamp>,
    /// Sum of the containers' `restartCount`.
    #[serde(default)]
    pub restarts: u32,
    /// `state.waiting.reason` of containers that wait (init ones too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<String>,
    /// Why it is not Ready, in the words of the component that knows: the
    /// scheduler's `PodScheduled=False` message, the kubelet's waiting
    /// reason and message (a pull failure quotes the registry's answer),
    /// a container's last termination (reason, exit code, message). Empty
    /// for a Ready pod, and in snapshots recorded before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<String>,
}

//! What the doctor knows about a cluster: plain data, filled by a collector
//! (the I/O half lives in another crate) and read by
//! [`crate::doctor::diagnose()`] and [`crate::doctor::plan()`].
//!
//! A snapshot is serialisable so it can be saved beside a report as
//! evidence and replayed as a test fixture. Field names are part of that
//! file format: the JSON keys are the camelCase form of the Rust names
//! (`takenAt`, `apiServices`, `namespaceContent`, ...), Kubernetes objects
//! inside keep their own wire shape. Every list may be omitted in a file and
//! reads as empty.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ContainerStatus, Event, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod,
    PodStatus, Service,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde::{Deserialize, Serialize};

use super::namespace::ControllerManagerMetrics;
use super::object::ObjectRecord;
use super::probe::{ApiServiceProbe, WebhookProbe};
use super::rbac::Rbac;
use super::service::{ServiceKey, ServiceLookup};

/// Everything one diagnosis looks at, taken at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// When the collector started reading the cluster. All ages (how long an
    /// object has been terminating, whether a lease is fresh) are measured
    /// against this instant, never against the wall clock, so a diagnosis
    /// of a recorded snapshot is reproducible.
    pub taken_at: Timestamp,
    /// Every Namespace, full objects (`spec.finalizers`,
    /// `metadata.finalizers`, `status.conditions`).
    #[serde(default)]
    pub namespaces: Vec<Namespace>,
    /// Every APIService registration, full objects (`spec.service`,
    /// `status.conditions`).
    #[serde(default)]
    pub api_services: Vec<APIService>,
    /// Every object of any listable type whose `metadata.deletionTimestamp`
    /// is set (metadata only). Namespaces may appear here too; they are
    /// diagnosed from [`Snapshot::namespaces`].
    #[serde(default)]
    pub terminating: Vec<ObjectRecord>,
    /// Every object (any listable namespaced type, metadata only) that lives
    /// in a Terminating namespace, whether or not it is itself being
    /// deleted. An empty list for a namespace is the proof that its content
    /// is gone, which holds only when [`Snapshot::discovery_failures`] is
    /// empty: the collector must record every type it could not list there.
    #[serde(default)]
    pub namespace_content: Vec<ObjectRecord>,
    /// Every Pod, full objects: who uses which claim, and pod-level facts
    /// (phase, container states, node) for pods stuck terminating.
    #[serde(default)]
    pub pods: Vec<Pod>,
    /// Every Lease in every namespace: leader-election leases are the
    /// evidence that a controller is alive.
    #[serde(default)]
    pub leases: Vec<Lease>,
    /// Group/versions the collector could not discover or list. Partial
    /// discovery is data, not an abort.
    #[serde(default)]
    pub discovery_failures: Vec<DiscoveryFailure>,
    /// Recent core/v1 Events (may be empty).
    #[serde(default)]
    pub events: Vec<Event>,
    /// (Added) Every PersistentVolume, full objects: `kubernetes.io/pv-protection`
    /// is normal while the volume is `Bound`. May be left empty; the
    /// doctor then judges pv-protection by its controller alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub persistent_volumes: Vec<PersistentVolume>,
    /// (Added) Every Node, full objects: whether a stuck pod's node still
    /// answers (its `Ready` condition, taints). Empty in older recordings:
    /// the doctor then judges a node by the pod alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Node>,
    /// (Added) Every ValidatingWebhookConfiguration, full objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validating_webhooks: Vec<ValidatingWebhookConfiguration>,
    /// (Added) Every MutatingWebhookConfiguration, full objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mutating_webhooks: Vec<MutatingWebhookConfiguration>,
    /// (Added) The lookup of every Service a webhook calls, admission and
    /// CRD conversion webhooks alike. A webhook whose Service has no lookup
    /// here is never judged dead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhook_services: Vec<ServiceLookup>,
    /// (Added) The lookup of every Service an APIService is served by. An
    /// unavailable APIService without one is judged by its condition's
    /// reason alone ([`crate::doctor::apiservice::backend`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_service_backends: Vec<ServiceLookup>,
    /// (Added) Server-side dry-runs that timed webhooks whose backend is
    /// slow or misconfigured ([`crate::doctor::backend::probe_targets`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhook_probes: Vec<WebhookProbe>,
    /// (Added) Timed discovery calls for aggregated APIs whose backend is
    /// there but fails ([`crate::doctor::backend::api_service_probe_targets`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_service_probes: Vec<ApiServiceProbe>,
    /// (Added) kube-controller-manager's namespace workqueue, read from its
    /// `/metrics` on a local cluster. `None`: not tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_manager_metrics: Option<ControllerManagerMetrics>,
    /// (Added) Every Deployment, StatefulSet and DaemonSet, full objects:
    /// evidence that a finalizer's owner runs (see `owner`). Empty in older
    /// recordings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<Deployment>,
    /// (Added) See [`Snapshot::deployments`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stateful_sets: Vec<StatefulSet>,
    /// (Added) See [`Snapshot::deployments`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub daemon_sets: Vec<DaemonSet>,
    /// (Added) Every ReplicaSet: what makes pods for a Deployment, and for
    /// owners the doctor does not list (an Argo Rollout, an operator that
    /// makes ReplicaSets). Empty in older recordings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replica_sets: Vec<ReplicaSet>,
    /// (Added) Every Job: a pod template that runs as a ServiceAccount.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<Job>,
    /// (Added) Every CronJob: runs as its ServiceAccount on its schedule,
    /// with no pod between runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cron_jobs: Vec<CronJob>,
    /// (Added) Types the collector could not read (a 403, a timeout): a
    /// finalizer's owner is never argued dead from a source listed here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<Unreadable>,
    /// (Added) Every Role, ClusterRole and binding: who could remove a
    /// finalizer (see `owner`). `None` in older recordings: then no key
    /// outside Kubernetes' own is argued dead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rbac: Option<Rbac>,
    /// (Added) Every PersistentVolumeClaim, full objects: which
    /// VolumeAttributesClasses are in use (`kubernetes.io/vac-protection`).
    /// `None` when not collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claims: Option<Vec<PersistentVolumeClaim>>,
    /// (Added) Every CustomResourceDefinition whose `spec.conversion.strategy`
    /// is `Webhook`, full objects: schemas and `status.storedVersions` are
    /// what argues whether strategy `None` would be lossless
    /// ([`crate::doctor::conversion`]). Their Services' lookups are in
    /// [`Snapshot::webhook_services`]. Empty in older recordings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversion_webhook_crds: Vec<CustomResourceDefinition>,
    /// (Added) Services being deleted that hold
    /// `service.kubernetes.io/load-balancer-cleanup`, full objects: their
    /// `status.loadBalancer.ingress` names the cloud load balancer a
    /// removal of the key by hand would leave
    /// ([`crate::doctor::model::load_balancer`]). Empty in older recordings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load_balancer_services: Vec<Service>,
}

/// A type the collector could not list, recorded instead of aborting.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unreadable {
    /// `plural.group` as kubectl spells it (`deployments.apps`, `pods`).
    pub resource: String,
    /// The error as the client reported it.
    pub message: String,
}

/// A group/version the collector could not discover (or a type it could
/// not list), recorded instead of aborting.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryFailure {
    /// e.g. `metrics.k8s.io/v1beta1`.
    pub group_version: String,
    /// The error as the client reported it.
    pub message: String,
}

impl Snapshot {
    /// How long ago (relative to [`Snapshot::taken_at`]) `at` was. Negative
    /// when `at` is later than the snapshot (a pod's deletionTimestamp lies
    /// in the future while its grace period runs).
    pub fn age_of(&self, at: Timestamp) -> SignedDuration {
        self.taken_at.duration_since(at)
    }

    /// The namespace called `name`, if the snapshot has it.
    pub fn namespace(&self, name: &str) -> Option<&Namespace> {
        self.namespaces
            .iter()
            .find(|ns| ns.metadata.name.as_deref() == Some(name))
    }

    /// The APIService called `name`, if the snapshot has it.
    pub fn api_service(&self, name: &str) -> Option<&APIService> {
        self.api_services
            .iter()
            .find(|a| a.metadata.name.as_deref() == Some(name))
    }

    /// The collector's lookup of a webhook's Service, if it made one.
    pub fn service_lookup(&self, key: &ServiceKey) -> Option<&ServiceLookup> {
        self.webhook_services.iter().find(|l| l.service == *key)
    }

    /// Objects recorded as living in namespace `ns` (from
    /// [`Snapshot::namespace_content`]).
    pub fn content_of<'a>(&'a self, ns: &'a str) -> impl Iterator<Item = &'a ObjectRecord> + 'a {
        self.namespace_content
            .iter()
            .filter(move |r| r.metadata.namespace.as_deref() == Some(ns))
    }

    /// Whether `lease` was renewed recently enough to count as held by a
    /// live process: `renewTime` no older than three lease durations
    /// (`leaseDurationSeconds`, 15 s when unset, the client-go default)
    /// before [`Snapshot::taken_at`]. A renew time in the future (clock
    /// skew) counts as fresh. A lease without `renewTime` is not fresh.
    pub fn lease_is_fresh(&self, lease: &Lease) -> bool {
        let Some(spec) = &lease.spec else {
            return false;
        };
        let Some(renew) = &spec.renew_time else {
            return false;
        };
        let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15).max(1));
        self.age_of(renew.0) <= SignedDuration::from_secs(3 * duration)
    }

    /// The leases that are fresh (see [`Snapshot::lease_is_fresh`]).
    pub fn fresh_leases(&self) -> impl Iterator<Item = &Lease> {
        self.leases.iter().filter(|l| self.lease_is_fresh(l))
    }

    /// The Warning events about the pod with this metadata (matched by
    /// namespace and name, and by UID when both sides have one, so events
    /// of an earlier pod with the same name are left out).
    pub fn pod_warnings<'a>(&'a self, pod: &'a ObjectMeta) -> impl Iterator<Item = &'a Event> + 'a {
        self.pod_events(pod)
            .filter(|e| e.type_.as_deref() == Some("Warning"))
    }

    /// The events about a pod, Normal and Warning, in the order listed.
    pub fn pod_events<'a>(&'a self, pod: &'a ObjectMeta) -> impl Iterator<Item = &'a Event> + 'a {
        let uid = pod.uid.as_deref();
        self.events.iter().filter(move |e| {
            let o = &e.involved_object;
            o.kind.as_deref() == Some("Pod")
                && o.namespace == pod.namespace
                && o.name == pod.name
                && (uid.is_none() || o.uid.is_none() || o.uid.as_deref() == uid)
        })
    }
}

/// A pod's container statuses, init containers first.
pub fn container_statuses(status: &PodStatus) -> impl Iterator<Item = &ContainerStatus> {
    status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
}

/// The runtime's container IDs in a pod's status (`containerd://<id>` ->
/// `<id>`).
pub fn status_container_ids(pod: &Pod) -> Vec<String> {
    pod.status
        .iter()
        .flat_map(container_statuses)
        .filter_map(|c| c.container_id.as_deref())
        .map(|id| id.rsplit("://").next().unwrap_or(id).to_owned())
        .collect()
}

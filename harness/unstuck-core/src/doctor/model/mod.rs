//! The doctor's model: the plain data that every other part of the doctor
//! reads and writes, at the bottom of its imports. A collector (elsewhere)
//! fills a [`Snapshot`]; the detectors turn it into [`Finding`]s, the
//! planner into a plan, the graph into a picture of what waits on what.
//! They all import these types; nothing here imports them: no detector,
//! planner, owner judging or graph code.
//!
//! One file per concept:
//! - [`object`]: which object a finding is about ([`ObjectRef`]), and an
//!   object as a metadata-only LIST returned it ([`ObjectRecord`]);
//! - [`snapshot`]: what a collector read of a cluster ([`Snapshot`]);
//! - [`finding`]: what the doctor found ([`Finding`], [`FindingDetail`])
//!   and the facts findings carry;
//! - [`finding_kind`]: the kinds of finding and their names
//!   ([`FindingKind`]);
//! - [`load_balancer`]: a Service waiting on its cloud load balancer's
//!   deletion ([`LoadBalancerCleanup`]);
//! - [`pull`]: an image pull that keeps a pod from starting
//!   ([`ImagePull`]);
//! - [`service`]: the Services behind webhooks and APIServices, as looked
//!   up ([`ServiceKey`], [`ServiceLookup`]);
//! - [`probe`]: the collector's timed calls to backends that fail;
//! - [`webhook`]: admission webhooks as the doctor sees them
//!   ([`WebhookView`]);
//! - [`verdict`]: the verdict on a finalizer's owner ([`OwnerVerdict`],
//!   [`FinalizerVerdict`]);
//! - [`rbac`]: the cluster's RBAC objects ([`Rbac`]);
//! - [`namespace`]: what the namespace controller shows (its conditions'
//!   counts, its workqueue, why it is not progressing).
//!
//! Methods here are the data's own: accessors, names, one-line texts.
//! Judging (whether a backend is gone, an owner alive, a write rejected)
//! stays with the code that does it, whose modules re-export these types
//! under their old paths (`doctor::finding::Finding`,
//! `doctor::snapshot::Snapshot`, `doctor::webhook::ServiceKey`, ...).

pub mod finding;
pub mod finding_kind;
pub mod load_balancer;
pub mod namespace;
pub mod node_cause;
pub mod object;
pub mod probe;
pub mod pull;
pub mod rbac;
pub mod service;
pub mod snapshot;
pub mod verdict;
pub mod webhook;

pub use finding::{
    ApiServiceFacts, ConversionWebhookFacts, DeadWebhookFacts, FinalizerFacts, Finding,
    FindingDetail, Outage, PodStartCause, PodStuckHint, RejectedWrite,
};
pub use finding_kind::{FindingKind, UnknownFindingKind};
pub use load_balancer::{
    CLOUD_CONTROLLER_LEASE, CloudFailure, LOAD_BALANCER_CLEANUP, LoadBalancerCleanup,
    SERVICE_CONTROLLER, holds_cleanup_key,
};
pub use namespace::{
    ControllerManagerMetrics, FinalizerCount, NamespaceStall, ResourceCount, StallCause,
    WorkqueueMetrics,
};
pub use node_cause::NodeCause;
pub use object::{ObjectRecord, ObjectRef, display_name, split_api_version};
pub use probe::{ApiServiceProbe, WebhookProbe};
pub use pull::{ImagePull, PullProblem};
pub use rbac::Rbac;
pub use service::{BackendPod, EndpointRead, ServiceKey, ServiceLookup};
pub use snapshot::{
    DiscoveryFailure, Snapshot, Unreadable, container_statuses, status_container_ids,
};
pub use verdict::{FinalizerRemoval, FinalizerVerdict, OwnerVerdict};
pub use webhook::{WebhookConfigKind, WebhookId, WebhookView};

//! The doctor: diagnoses objects stuck in Terminating from the outside and
//! plans the remedy, least force first.
//!
//! Pipeline: collect (I/O, elsewhere) -> [`diagnose()`] (pure) -> [`plan()`]
//! (pure) -> apply (I/O, elsewhere). Nothing here knows which scenario, if
//! any, caused what it sees: it reads a [`Snapshot`] of the cluster as it
//! would a customer's.
//!
//! - [`model`]: the plain data everything else reads and writes (the
//!   snapshot, findings and the facts they carry), at the bottom of the
//!   imports.
//! - [`snapshot`]: the data a collector fills (its types are the model's).
//! - [`conditions`]: parsing the namespace controller's and aggregator's
//!   status conditions.
//! - [`apiservice`]: whether an unavailable APIService's backend is gone.
//! - [`backend`]: whether a webhook's or APIService's Service is proven gone.
//! - [`webhook`]: admission webhooks and the errors of calling them.
//! - [`admission`]: which webhooks a write goes through.
//! - [`rejected`]: dead webhooks that reject the write a stuck object's release needs.
//! - [`conversion`]: CRD conversion webhooks whose backend is gone.
//! - [`owner`]: arguing whether a finalizer's owner is alive.
//! - [`starting`]: explaining pods that never start.
//! - [`namespace_stall`]: why the namespace controller is not progressing.
//! - [`normal`]: what is being deleted and is not stuck yet.
//! - [`redact`]: a snapshot without the values workloads were given.
//! - [`diagnose()`]: snapshot -> [`Finding`]s.
//! - [`plan()`]: findings -> [`Plan`] with exact API calls.
//! - [`graph`]: findings, plan and snapshot -> [`BlockerGraph`]: what
//!   waits on what, down to the root causes.

pub mod admission;
pub mod apiservice;
pub mod backend;
pub mod blind;
pub mod conditions;
pub mod conversion;
pub mod diagnose;
pub mod finding;
pub mod graph;
pub mod model;
pub mod namespace_stall;
pub mod node;
pub mod normal;
pub mod owner;
pub mod plan;
pub mod redact;
pub mod rejected;
pub mod scoped;
pub mod snapshot;
pub mod starting;
pub mod webhook;

pub use diagnose::{DiagnoseOptions, diagnose};
pub use graph::BlockerGraph;
pub use model::{
    ApiServiceFacts, ConversionWebhookFacts, DeadWebhookFacts, DiscoveryFailure, FinalizerFacts,
    FinalizerRemoval, FinalizerVerdict, Finding, FindingDetail, FindingKind, ObjectRecord,
    ObjectRef, Outage, OwnerVerdict, PodStartCause, PodStuckHint, ServiceKey, ServiceLookup,
    Snapshot, UnknownFindingKind, WebhookConfigKind,
};
pub use owner::finalizer_owner;
pub use plan::{
    Action, ApiCall, BlockedStep, DeleteApiService, FinalizeError, FinalizeNamespace, ObjectTarget,
    Plan, PlannedStep, RemoveFinalizers, SetCrdConversionNone, SetWebhookFailurePolicy, plan,
    plan_assuming,
};

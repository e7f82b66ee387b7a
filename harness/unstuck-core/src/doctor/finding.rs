//! What the doctor found: one [`Finding`] per fact worth acting on (or
//! worth leaving alone), with the evidence that argues it.
//!
//! The types are the model's ([`super::model::finding`],
//! [`super::model::finding_kind`], [`super::model::object`]), re-exported
//! here under their old paths; [`pull`] reads the kubelet's words about an
//! image pull.

pub mod pull;

pub use super::model::finding::{Finding, FindingDetail, Outage, PodStartCause, PodStuckHint};
pub use super::model::finding_kind::{FindingKind, UnknownFindingKind};
pub use super::model::object::ObjectRef;
pub use super::model::pull::{ImagePull, PullProblem};
pub use super::model::verdict::FinalizerRemoval;

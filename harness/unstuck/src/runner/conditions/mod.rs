//! Checking one `expect` condition against the live cluster. A check that
//! holds returns the evidence, quoted from the cluster as a person would
//! see it; one that does not says what it saw instead ([`CheckError`]).
//!
//! One file per family of conditions: objects by name or prefix
//! (`object`), status conditions (`status`), what is left in storage
//! and discovery (`content`), the kubelet's log (`node_log`) and
//! events (`event`). A new condition is a variant in the core's
//! `scenario/condition.rs`, an arm in [`check`] and a function in the
//! family's file.

mod content;
mod event;
mod lookup;
mod node_log;
mod object;
mod status;

use kube::Client;
use unstuck_core::scenario::{Condition, LogicalRef};

use super::{names::Names, objects::ResolveError};
use crate::node::{AnyNode, NodeError};

pub use lookup::get;

/// What a condition check needs besides the client.
pub struct CheckContext<'a> {
    pub client: &'a Client,
    /// The run's names for the scenario's logical ones.
    pub names: &'a Names,
    /// The node, whose kubelet log a condition may quote.
    pub node: Option<&'a AnyNode>,
}

/// Why a condition does not hold (yet): what the cluster showed instead,
/// or what kept the check from reading it. Either way the gate polls on
/// and, at its deadline, quotes the last one.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The cluster answered, with something else than the condition wants.
    #[error("{0}")]
    Unmet(String),
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error("{what}: {}", crate::kube_error::text(source))]
    Api { what: String, source: kube::Error },
    #[error("{kind} has no apiVersion")]
    NoApiVersion { kind: String },
    #[error("this cluster provider gives no access to the kubelet log")]
    NoNode,
    #[error("reading the kubelet log: {0}")]
    Node(#[from] NodeError),
}

impl CheckError {
    /// An API call's error, with what it did.
    fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let what = what.into();
        move |source| Self::Api { what, source }
    }
}

/// Holds (with evidence) or not (with what was seen).
pub type CheckResult = Result<String, CheckError>;

/// `Ok(line)` when `holds`, else the line as what was seen.
fn verdict(holds: bool, line: String) -> CheckResult {
    if holds {
        Ok(line)
    } else {
        Err(CheckError::Unmet(line))
    }
}

pub async fn check(ctx: &CheckContext<'_>, cond: &Condition) -> CheckResult {
    match cond {
        Condition::Terminating(r) if r.name_prefix().is_some() => {
            object::terminating_with_prefix(ctx, r).await
        }
        Condition::Gone(r) if r.name_prefix().is_some() => object::gone_with_prefix(ctx, r).await,
        Condition::Terminating(r) => object::terminating(ctx, r).await,
        Condition::Gone(r) => object::gone(ctx, r).await,
        Condition::Running(r) => object::running(ctx, r).await,
        Condition::Ready(r) => object::ready(ctx, r).await,
        Condition::NamespaceCondition(c) => status::namespace(ctx, c).await,
        Condition::ApiServiceCondition(c) => status::api_service(ctx, c).await,
        Condition::Condition(c) => status::object(ctx, c).await,
        Condition::NodeCondition(c) => status::node(ctx, c).await,
        Condition::NoContentLeft(r) => content::none_left(ctx, r).await,
        Condition::DiscoveryComplete {} => content::discovery_complete(ctx).await,
        Condition::KubeletLog(k) => node_log::kubelet_log(ctx, k).await,
        Condition::Event(e) => event::event(ctx, e).await,
    }
}

fn describe(ctx: &CheckContext<'_>, r: &LogicalRef) -> String {
    match real_namespace(ctx, r) {
        Some(ns) => format!("{} {ns}/{}", *r.kind, real_name(ctx, r)),
        None => format!("{} {}", *r.kind, real_name(ctx, r)),
    }
}

/// The run's name for the object: a namespace's and a cluster-scoped
/// object's names are logical (a reference without a namespace is
/// cluster-scoped).
fn real_name(ctx: &CheckContext<'_>, r: &LogicalRef) -> String {
    ctx.names.object(&r.kind, &r.name, r.namespace.is_some())
}

fn real_namespace(ctx: &CheckContext<'_>, r: &LogicalRef) -> Option<String> {
    r.namespace.as_ref().map(|ns| ctx.names.namespace(ns))
}

//! One model of a stuck cluster: "X waits on Y", with evidence.
//!
//! The doctor's findings each argue one fact; the [`BlockerGraph`] joins
//! them into chains: a Terminating namespace waits on the objects left in
//! it, an object on its finalizer keys, a key on its owner (the verdict is
//! the key node's state), a namespace on the admission webhooks that reject
//! its controller's deletes, a webhook on its Service, and so on down to
//! the **root causes**: nodes with nothing further to wait on. Each edge
//! cites the finding that argues it (numbered from 1, as reports list
//! them), and each root carries the plan step that acts on it, if any.
//!
//! - `build`: the nodes and their ids; `edges`: one function per
//!   [`FindingDetail`](super::FindingDetail) variant, one file per blocker
//!   family (a new variant adds one match arm in `edges/mod.rs`);
//!   `node_causes`: the node doctor's causes of a stuck pod.
//! - [`tree`]: each stuck target as a tree down to its root causes, for
//!   the terminal; [`mermaid`]: a `flowchart TD` for Markdown reports.
//!
//! The graph is pure data (serde): the doctor's JSON report and each
//! scenario's report carry it as is (`docs/blocker-graph.md`).

mod build;
mod edges;
mod index;
pub mod mermaid;
mod node_causes;
pub mod tree;

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::model::{Finding, Snapshot};
use super::node::NodeFinding;
use super::plan::{Action, Plan, PlannedStep};
pub use build::{object_id, object_label};
pub use index::GraphIndex;

/// What waits on what, from one diagnosis.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockerGraph {
    /// Every thing the findings name, in the order first named.
    pub nodes: Vec<GraphNode>,
    /// "`from` waits on `to`", one per pair, in the order argued.
    pub edges: Vec<GraphEdge>,
    /// The root causes: nodes something waits on that wait on nothing
    /// (and stuck targets nothing explains).
    pub roots: Vec<RootCause>,
    /// Ids of the stuck targets: Terminating namespaces and objects that
    /// nothing else in the graph waits on (the tops of the trees).
    pub targets: Vec<String>,
}

/// One thing in the graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphNode {
    /// Stable: derived from what the node is (an object's apiVersion,
    /// kind, namespace and name; a key and the object it is on; ...),
    /// never from the order of findings.
    pub id: String,
    pub kind: NodeKind,
    /// What it is, for people: `namespace app-x`, `ConfigMap app-x/cfg`,
    /// `finalizer example.com/cleanup`.
    pub label: String,
    pub state: NodeState,
    /// A short qualifier of the state: how long it has been Terminating,
    /// why a Service counts as gone (`ServiceNotFound`), ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What kind of thing a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NodeKind {
    Namespace,
    /// Any other Kubernetes object (by apiVersion, kind, namespace, name).
    Object,
    /// A finalizer key on one object; its state is its owner's verdict.
    Finalizer,
    /// A token in a Namespace's `spec.finalizers`.
    SpecToken,
    /// One admission webhook of a webhook configuration.
    Webhook,
    /// A Service a webhook or an APIService calls.
    Service,
    ApiService,
    /// A CustomResourceDefinition (its conversion webhook, its cleanup).
    Crd,
    /// A node's kubelet.
    Node,
    /// What runs a pod on its node: the container runtime, the network
    /// plugin, the pod's volumes, its processes in the kernel.
    Runtime,
    /// A controller of Kubernetes' own (the namespace controller).
    Controller,
    /// Content a namespace's conditions count, not seen object by object.
    Content,
    /// A failure a condition reports that no finding explains further.
    Condition,
    /// Anything else a finding names (someone using a protected object).
    Other,
}

/// The state of a node, as the findings argue it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NodeState {
    /// Being deleted and not gone.
    Terminating,
    /// A finalizer whose owner is argued dead.
    Dead,
    /// A finalizer whose owner (a controller) is alive.
    Alive,
    /// Neither argued one way nor the other.
    Unknown,
    /// Normal while something uses it (a protection finalizer, a user).
    InUse,
    /// A Service proven to have no backend.
    Gone,
    /// A webhook with `failurePolicy: Fail` whose backend is gone: it
    /// rejects everything it matches.
    FailingClosed,
    /// An APIService whose `Available` condition is not `True`.
    Unavailable,
    /// A token or key nothing will remove by itself.
    NoHandler,
    /// A node whose kubelet does not answer.
    NotReady,
    /// Something on a node (runtime, network plugin, volume teardown) or a
    /// controller that fails at its job.
    Failing,
    /// Content a condition counts as remaining.
    Remaining,
    /// A pod that does not start (not stuck in deletion).
    NotStarting,
    /// Present, with nothing to say about it.
    Present,
}

impl NodeState {
    /// Words for people: `dead`, `in use`, `fails closed`.
    pub fn words(self) -> &'static str {
        match self {
            NodeState::Terminating => "Terminating",
            NodeState::Dead => "dead",
            NodeState::Alive => "alive",
            NodeState::Unknown => "unknown",
            NodeState::InUse => "in use",
            NodeState::Gone => "gone",
            NodeState::FailingClosed => "fails closed",
            NodeState::Unavailable => "unavailable",
            NodeState::NoHandler => "no handler",
            NodeState::NotReady => "not ready",
            NodeState::Failing => "failing",
            NodeState::Remaining => "remaining",
            NodeState::NotStarting => "not starting",
            NodeState::Present => "present",
        }
    }

    /// When one node is named by several findings, the more telling state
    /// wins: Terminating over anything, anything over Unknown, Unknown
    /// over Present.
    fn rank(self) -> u8 {
        match self {
            NodeState::Present => 0,
            NodeState::Unknown => 1,
            NodeState::Terminating => 3,
            _ => 2,
        }
    }
}

/// "`from` waits on `to`".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphEdge {
    pub from: String,
    pub to: String,
    /// The evidence, in one line (whole here; the terminal shortens it).
    pub why: String,
    /// The number of the finding that argues it (from 1, as reports
    /// number findings); `None` for what the node doctor found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<usize>,
}

/// A node with nothing further to wait on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RootCause {
    /// The node's id.
    pub id: String,
    pub state: NodeState,
    /// The findings (numbers from 1) that argue something waits on it.
    pub findings: Vec<usize>,
    /// The plan step that acts on it, if the plan has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remedy: Option<Remedy>,
}

/// A plan step, as a root cause cites it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remedy {
    /// The step's number in the plan (from 1, as the plan lists them).
    pub step: usize,
    /// `RemoveFinalizers`, `SetWebhookFailurePolicy`, ... or `Wait` /
    /// `Refuse` when the plan changes nothing about it.
    pub action: String,
    /// The finding the step is planned for (from 1).
    pub finding: usize,
    /// Whether the step changes the cluster.
    pub changes: bool,
}

impl BlockerGraph {
    /// The graph of one diagnosis: `findings` as [`super::diagnose()`]
    /// returned them (in report order: edges cite their position),
    /// `plan` made from them, and the `snapshot` they were made from
    /// (ages, webhook configurations, Service lookups, owner chains).
    pub fn build(findings: &[Finding], plan: &Plan, snapshot: &Snapshot) -> Self {
        Self::build_with_nodes(findings, plan, snapshot, &[])
    }

    /// [`BlockerGraph::build`], with what the node doctor found on the
    /// nodes of stuck pods: a pod it looked at waits on the causes it
    /// named instead of on the API doctor's guess from the pod's status.
    pub fn build_with_nodes(
        findings: &[Finding],
        plan: &Plan,
        snapshot: &Snapshot,
        node_findings: &[&NodeFinding],
    ) -> Self {
        let mut b = build::Builder::new(snapshot, findings, node_findings);
        for f in node_findings {
            node_causes::add(&mut b, f);
        }
        for (i, f) in findings.iter().enumerate() {
            edges::add(&mut b, i, f);
        }
        b.finish(plan)
    }

    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&GraphNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The edges out of `id` (what it waits on), in the order argued.
    pub fn waits_on<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a GraphEdge> + 'a {
        self.edges.iter().filter(move |e| e.from == id)
    }

    /// The root cause with this id, if it is one.
    pub fn root(&self, id: &str) -> Option<&RootCause> {
        self.roots.iter().find(|r| r.id == id)
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The tops the renderers start from ([`GraphIndex::tops`]).
    pub fn tops(&self) -> Vec<&GraphNode> {
        GraphIndex::new(self).tops()
    }
}

impl GraphNode {
    /// `label` with its state, for people: `namespace app-x (Terminating
    /// 5m0s)`, `finalizer example.com/cleanup: owner dead`, `Service
    /// monitoring/adapter: gone (ServiceNotFound)`.
    pub fn describe(&self) -> String {
        let detail = |s: String| match &self.detail {
            Some(d) => format!("{s} ({d})"),
            None => s,
        };
        match (self.kind, self.state) {
            (_, NodeState::Present) => detail(self.label.clone()),
            (_, NodeState::Terminating) => match &self.detail {
                Some(d) => format!("{} (Terminating {d})", self.label),
                None => format!("{} (Terminating)", self.label),
            },
            (NodeKind::Finalizer, NodeState::Dead | NodeState::Alive | NodeState::Unknown) => {
                detail(format!("{}: owner {}", self.label, self.state.words()))
            }
            _ => detail(format!("{}: {}", self.label, self.state.words())),
        }
    }
}

impl Remedy {
    /// `RemoveFinalizers (step 1)`.
    pub fn line(&self) -> String {
        format!("{} (step {})", self.action, self.step)
    }
}

/// Plan steps by the finding (0-based) they were planned for, each with
/// its position in the plan.
type StepsByFinding<'p> = HashMap<usize, Vec<(usize, &'p PlannedStep)>>;

fn steps_by_finding(plan: &Plan) -> StepsByFinding<'_> {
    let mut out: StepsByFinding = HashMap::new();
    for (pos, s) in plan.steps.iter().enumerate() {
        out.entry(s.finding_index).or_default().push((pos, s));
    }
    out
}

/// The plan step that acts on `root` among the steps planned for
/// `findings` (0-based): a step that changes the cluster first, else the
/// first (a wait or a refusal says why nothing is changed). A step
/// removing finalizers (or spec tokens) acts on a key's root only if it
/// removes that key.
fn remedy_for(
    steps: &StepsByFinding,
    findings: &BTreeSet<usize>,
    root: &GraphNode,
    keys: &HashMap<String, String>,
) -> Option<Remedy> {
    let key = keys.get(&root.id);
    let acts_on = |action: &Action| match action {
        Action::RemoveFinalizers(r) => key.is_none_or(|k| r.remove.contains(k)),
        Action::FinalizeNamespace(f) => key.is_none_or(|k| f.remove_tokens.contains(k)),
        _ => true,
    };
    let mut candidates: Vec<(usize, &PlannedStep)> = findings
        .iter()
        .filter_map(|i| steps.get(i))
        .flatten()
        .filter(|(_, s)| acts_on(&s.action))
        .copied()
        .collect();
    candidates.sort_by_key(|(pos, _)| *pos);
    let (pos, step) = candidates
        .iter()
        .find(|(_, s)| s.action.is_mutating())
        .or_else(|| candidates.first())?;
    Some(Remedy {
        step: pos + 1,
        action: step.action.name().to_owned(),
        finding: step.finding_index + 1,
        changes: step.action.is_mutating(),
    })
}

#[cfg(test)]
mod tests;

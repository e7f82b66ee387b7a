//! The nodes of a [`BlockerGraph`] and their ids: one constructor per kind
//! of thing, so that every finding that names the same thing names the
//! same node. Ids are stable across runs of the same diagnosis: they come
//! from what a thing is, never from the order it was met in.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

mod blockers;

use super::{BlockerGraph, GraphEdge, GraphNode, NodeKind, NodeState, RootCause};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::doctor::model::{Finding, FindingDetail, ObjectRecord, ObjectRef, Snapshot};
use crate::doctor::node::NodeFinding;
use crate::doctor::owner::fmt_secs;
use crate::doctor::plan::Plan;

/// `object:<apiVersion>:<Kind>:<namespace>/<name>`, or without the
/// namespace when cluster-scoped.
pub fn object_id(r: &ObjectRef) -> String {
    match &r.namespace {
        Some(ns) => format!("object:{}:{}:{ns}/{}", r.api_version, r.kind, r.name),
        None => format!("object:{}:{}:{}", r.api_version, r.kind, r.name),
    }
}

/// `namespace app-x`, `ConfigMap app-x/cfg`, `APIService v1.x.io`.
pub fn object_label(r: &ObjectRef) -> String {
    if r.kind == "Namespace" {
        return format!("namespace {}", r.name);
    }
    match &r.namespace {
        Some(ns) => format!("{} {ns}/{}", r.kind, r.name),
        None => format!("{} {}", r.kind, r.name),
    }
}

fn object_kind(r: &ObjectRef) -> NodeKind {
    match r.kind.as_str() {
        "Namespace" => NodeKind::Namespace,
        "APIService" => NodeKind::ApiService,
        "CustomResourceDefinition" => NodeKind::Crd,
        _ => NodeKind::Object,
    }
}

/// Collects nodes and edges; [`Builder::finish`] adds roots and targets.
pub(super) struct Builder<'a> {
    pub snapshot: &'a Snapshot,
    pub findings: &'a [Finding],
    /// Pods the node doctor looked at (`namespace/name`): their causes
    /// come from it, not from the API doctor's hint.
    node_pods: HashSet<String>,
    graph: BlockerGraph,
    index: HashMap<String, usize>,
    edge_pairs: HashSet<(String, String)>,
    /// Every finding that argued an edge into a node (0-based), also
    /// those whose edge was already there: the root's remedy is looked
    /// for among all of them.
    argued: BTreeMap<String, BTreeSet<usize>>,
    /// Finalizer key (or spec token) of each finalizer (or token) node:
    /// a step acts on such a root only if it removes that key.
    pub(super) keys: HashMap<String, String>,
    /// The snapshot's Terminating objects and those in Terminating
    /// namespaces, by kind, namespace and name (found once each, not by a
    /// scan per object: a namespace may hold thousands).
    records: HashMap<RecordKey<'a>, Vec<&'a ObjectRecord>>,
    pods: HashMap<(Option<&'a str>, &'a str), &'a Pod>,
    /// Terminating objects by the owner UID they block
    /// (`blockOwnerDeletion`).
    dependents: HashMap<&'a str, Vec<&'a ObjectRecord>>,
    /// The first WaitingOnDependents finding about each owner UID.
    dependents_findings: HashMap<&'a str, usize>,
}

type RecordKey<'a> = (&'a str, Option<&'a str>, &'a str);

impl<'a> Builder<'a> {
    pub fn new(
        snapshot: &'a Snapshot,
        findings: &'a [Finding],
        node_findings: &[&NodeFinding],
    ) -> Self {
        let mut records: HashMap<RecordKey<'a>, Vec<&'a ObjectRecord>> = HashMap::new();
        let mut dependents: HashMap<&'a str, Vec<&'a ObjectRecord>> = HashMap::new();
        for rec in snapshot
            .terminating
            .iter()
            .chain(&snapshot.namespace_content)
        {
            records
                .entry((rec.kind.as_str(), rec.namespace(), rec.name()))
                .or_default()
                .push(rec);
        }
        for rec in &snapshot.terminating {
            for o in rec.metadata.owner_references.iter().flatten() {
                if o.block_owner_deletion == Some(true) {
                    dependents.entry(o.uid.as_str()).or_default().push(rec);
                }
            }
        }
        let mut dependents_findings = HashMap::new();
        for (i, f) in findings.iter().enumerate() {
            if let (FindingDetail::WaitingOnDependents { .. }, Some(uid)) =
                (&f.detail, &f.subject.uid)
            {
                dependents_findings.entry(uid.as_str()).or_insert(i);
            }
        }
        Builder {
            snapshot,
            findings,
            records,
            pods: snapshot
                .pods
                .iter()
                .filter_map(|p| {
                    Some((
                        (p.metadata.namespace.as_deref(), p.metadata.name.as_deref()?),
                        p,
                    ))
                })
                .collect(),
            dependents,
            dependents_findings,
            node_pods: node_findings.iter().map(|f| pod_key(&f.pod)).collect(),
            graph: BlockerGraph::default(),
            index: HashMap::new(),
            edge_pairs: HashSet::new(),
            argued: BTreeMap::new(),
            keys: HashMap::new(),
        }
    }

    /// Adds the node, or makes the existing one's state the more telling
    /// of the two ([`NodeState::rank`]). Returns its id.
    pub fn node(
        &mut self,
        id: String,
        kind: NodeKind,
        label: String,
        state: NodeState,
        detail: Option<String>,
    ) -> String {
        if let Some(&i) = self.index.get(&id) {
            let n = &mut self.graph.nodes[i];
            if state.rank() > n.state.rank() {
                n.state = state;
                if detail.is_some() {
                    n.detail = detail;
                }
            } else if n.detail.is_none() && state == n.state {
                n.detail = detail;
            }
            return id;
        }
        self.index.insert(id.clone(), self.graph.nodes.len());
        self.graph.nodes.push(GraphNode {
            id: id.clone(),
            kind,
            label,
            state,
            detail,
        });
        id
    }

    /// "`from` waits on `to`", argued by finding `finding` (0-based), or by
    /// the node doctor (`None`). One edge per pair: the first argument is
    /// kept, later ones only count for the root's remedy.
    pub fn edge(&mut self, from: &str, to: &str, why: impl Into<String>, finding: Option<usize>) {
        if from == to {
            return;
        }
        if let Some(i) = finding {
            self.argued.entry(to.to_owned()).or_default().insert(i);
        }
        if !self.edge_pairs.insert((from.to_owned(), to.to_owned())) {
            return;
        }
        self.graph.edges.push(GraphEdge {
            from: from.to_owned(),
            to: to.to_owned(),
            why: why.into(),
            finding: finding.map(|i| i + 1),
        });
    }

    /// An object, Terminating (with its age) when the snapshot shows it
    /// being deleted.
    pub fn object(&mut self, r: &ObjectRef) -> String {
        let (state, detail) = match self.deletion_age(r) {
            Some(age) => (NodeState::Terminating, age),
            None => (NodeState::Present, None),
        };
        self.node(object_id(r), object_kind(r), object_label(r), state, detail)
    }

    /// An object a finding says is stuck in deletion: Terminating even if
    /// the snapshot at hand does not hold it.
    pub fn stuck(&mut self, r: &ObjectRef) -> String {
        let detail = self.deletion_age(r).flatten();
        self.node(
            object_id(r),
            object_kind(r),
            object_label(r),
            NodeState::Terminating,
            detail,
        )
    }

    /// `Some(age)` when the snapshot shows `r` being deleted (`Some(None)`
    /// when its deletionTimestamp lies ahead: a grace period running).
    fn deletion_age(&self, r: &ObjectRef) -> Option<Option<String>> {
        let s = self.snapshot;
        let meta = if r.kind == "Namespace" && r.namespace.is_none() {
            s.namespace(&r.name).map(|n| &n.metadata)
        } else if r.kind == "Pod" && r.api_version == "v1" {
            self.pods
                .get(&(r.namespace.as_deref(), r.name.as_str()))
                .map(|p| &p.metadata)
                .or_else(|| self.record_meta(r))
        } else {
            self.record_meta(r)
        }?;
        let ts = meta.deletion_timestamp.as_ref()?;
        let age = s.age_of(ts.0).as_secs();
        Some((age >= 0).then(|| fmt_secs(age)))
    }

    /// The snapshot's record of `r` (a Terminating object, or one in a
    /// Terminating namespace), by kind, namespace, name and, when known,
    /// UID.
    pub fn record(&self, r: &ObjectRef) -> Option<&'a ObjectRecord> {
        self.records
            .get(&(r.kind.as_str(), r.namespace.as_deref(), r.name.as_str()))?
            .iter()
            .find(|rec| r.uid.is_none() || rec.metadata.uid == r.uid)
            .copied()
    }

    fn record_meta(&self, r: &ObjectRef) -> Option<&'a ObjectMeta> {
        self.record(r).map(|rec| &rec.metadata)
    }

    /// Terminating objects that name owner `uid` with `blockOwnerDeletion`.
    pub fn blocking_dependents(&self, uid: &str) -> &[&'a ObjectRecord] {
        self.dependents.get(uid).map_or(&[], Vec::as_slice)
    }

    /// The first WaitingOnDependents finding (0-based) about owner `uid`.
    pub fn dependents_finding(&self, uid: &str) -> Option<usize> {
        self.dependents_findings.get(uid).copied()
    }

    /// Finalizer `key` on the object `object` (an id), its owner's verdict
    /// as the state.
    pub fn finalizer(
        &mut self,
        object: &str,
        key: &str,
        state: NodeState,
        detail: Option<String>,
    ) -> String {
        let id = format!("finalizer:{key}@{object}");
        self.keys.insert(id.clone(), key.to_owned());
        self.node(
            id,
            NodeKind::Finalizer,
            format!("finalizer {key}"),
            state,
            detail,
        )
    }

    /// Token `token` in namespace `ns`'s `spec.finalizers`.
    pub fn spec_token(&mut self, ns: &str, token: &str, state: NodeState, detail: &str) -> String {
        let id = format!("token:{token}@namespace:{ns}");
        self.keys.insert(id.clone(), token.to_owned());
        self.node(
            id,
            NodeKind::SpecToken,
            format!("spec.finalizers token {token}"),
            state,
            Some(detail.to_owned()),
        )
    }

    /// Counts finding `finding` (0-based) as arguing about node `id`
    /// without an edge into it: a stuck object no finding explains
    /// further still finds its finding's plan step.
    pub fn argue(&mut self, id: &str, finding: usize) {
        self.argued
            .entry(id.to_owned())
            .or_default()
            .insert(finding);
    }

    /// Whether the node doctor looked at this pod.
    pub fn node_doctor_saw(&self, pod: &ObjectRef) -> bool {
        self.node_pods.contains(&pod_key(pod))
    }

    /// Adds the roots, with the plan's step for each, and the targets.
    pub fn finish(mut self, plan: &Plan) -> BlockerGraph {
        let steps = super::steps_by_finding(plan);
        let g = &mut self.graph;
        let waits: HashSet<&str> = g.edges.iter().map(|e| e.from.as_str()).collect();
        let waited_on: HashSet<&str> = g.edges.iter().map(|e| e.to.as_str()).collect();
        g.targets = g
            .nodes
            .iter()
            .filter(|n| n.state == NodeState::Terminating && !waited_on.contains(n.id.as_str()))
            .map(|n| n.id.clone())
            .collect();
        let mut roots = Vec::new();
        for n in &g.nodes {
            let id = n.id.as_str();
            let sink = !waits.contains(id);
            if !(sink && (waited_on.contains(id) || n.state == NodeState::Terminating)) {
                continue;
            }
            let argued = self.argued.get(id).cloned().unwrap_or_default();
            roots.push(RootCause {
                id: n.id.clone(),
                state: n.state,
                findings: argued.iter().map(|i| i + 1).collect(),
                remedy: super::remedy_for(&steps, &argued, n, &self.keys),
            });
        }
        g.roots = roots;
        self.graph
    }
}

/// See [`Builder::on_node`].
#[derive(Clone, Debug)]
pub(super) enum NodePart {
    Kubelet,
    Runtime,
    Network,
    Volumes,
    Kernel,
    /// A part named by a node cause this module does not know yet.
    Other(String),
}

/// `namespace/name` of a pod.
pub(super) fn pod_key(pod: &ObjectRef) -> String {
    format!(
        "{}/{}",
        pod.namespace.as_deref().unwrap_or_default(),
        pod.name
    )
}

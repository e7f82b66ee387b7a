//! Lookups over a [`BlockerGraph`] by id, built once: a namespace holding
//! thousands of stuck objects is drawn in one pass, not one scan of every
//! edge per node.

use std::collections::{HashMap, HashSet};

use super::{BlockerGraph, GraphEdge, GraphNode, RootCause};

/// A [`BlockerGraph`] indexed by node id.
pub struct GraphIndex<'a> {
    pub graph: &'a BlockerGraph,
    nodes: HashMap<&'a str, &'a GraphNode>,
    out: HashMap<&'a str, Vec<&'a GraphEdge>>,
    into: HashMap<&'a str, Vec<&'a GraphEdge>>,
    roots: HashMap<&'a str, &'a RootCause>,
}

impl<'a> GraphIndex<'a> {
    pub fn new(graph: &'a BlockerGraph) -> Self {
        let mut out: HashMap<&str, Vec<&GraphEdge>> = HashMap::new();
        let mut into: HashMap<&str, Vec<&GraphEdge>> = HashMap::new();
        for e in &graph.edges {
            out.entry(e.from.as_str()).or_default().push(e);
            into.entry(e.to.as_str()).or_default().push(e);
        }
        GraphIndex {
            graph,
            nodes: graph.nodes.iter().map(|n| (n.id.as_str(), n)).collect(),
            out,
            into,
            roots: graph.roots.iter().map(|r| (r.id.as_str(), r)).collect(),
        }
    }

    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&'a GraphNode> {
        self.nodes.get(id).copied()
    }

    /// What `id` waits on, in the order argued.
    pub fn waits_on(&self, id: &str) -> &[&'a GraphEdge] {
        self.out.get(id).map_or(&[], Vec::as_slice)
    }

    /// What waits on `id`, in the order argued.
    pub fn waited_on_by(&self, id: &str) -> &[&'a GraphEdge] {
        self.into.get(id).map_or(&[], Vec::as_slice)
    }

    /// The root cause with this id, if it is one.
    pub fn root(&self, id: &str) -> Option<&'a RootCause> {
        self.roots.get(id).copied()
    }

    /// The tops the renderers start from: the stuck targets first, then
    /// anything else nothing waits on that waits on something itself (a
    /// dead webhook no Terminating namespace names yet).
    pub fn tops(&self) -> Vec<&'a GraphNode> {
        let targets: HashSet<&str> = self.graph.targets.iter().map(String::as_str).collect();
        let first = self.graph.targets.iter().filter_map(|t| self.node(t));
        let others = self.graph.nodes.iter().filter(|n| {
            let id = n.id.as_str();
            !self.into.contains_key(id) && self.out.contains_key(id) && !targets.contains(id)
        });
        first.chain(others).collect()
    }
}

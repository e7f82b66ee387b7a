//! The renderers on hand-made graphs; the graph built from recorded
//! snapshots is tested in `tests/doctor_graph.rs`.

use super::mermaid::{escape, flowchart};
use super::tree::{LINE_WIDTH, MAX_CHILDREN, lines};
use super::*;

fn node(id: &str, kind: NodeKind, label: &str, state: NodeState) -> GraphNode {
    GraphNode {
        id: id.into(),
        kind,
        label: label.into(),
        state,
        detail: None,
    }
}

fn edge(from: &str, to: &str, why: &str, finding: usize) -> GraphEdge {
    GraphEdge {
        from: from.into(),
        to: to.into(),
        why: why.into(),
        finding: Some(finding),
    }
}

/// namespace -> ConfigMap -> dead key, the key's removal planned as step 1.
fn chain(why: &str) -> BlockerGraph {
    let mut ns = node(
        "ns",
        NodeKind::Namespace,
        "namespace app-x",
        NodeState::Terminating,
    );
    ns.detail = Some("5m0s".into());
    BlockerGraph {
        nodes: vec![
            ns,
            node(
                "cm",
                NodeKind::Object,
                "ConfigMap app-x/cfg",
                NodeState::Terminating,
            ),
            node(
                "key",
                NodeKind::Finalizer,
                "finalizer example.com/cleanup",
                NodeState::Dead,
            ),
        ],
        edges: vec![
            edge("ns", "cm", "its content", 1),
            edge("cm", "key", why, 2),
        ],
        roots: vec![RootCause {
            id: "key".into(),
            state: NodeState::Dead,
            findings: vec![2],
            remedy: Some(Remedy {
                step: 1,
                action: "RemoveFinalizers".into(),
                finding: 2,
                changes: true,
            }),
        }],
        targets: vec!["ns".into()],
    }
}

#[test]
fn the_tree_goes_from_the_target_down_to_the_root_and_names_its_step() {
    let out = lines(&chain("no live owner"));
    assert_eq!(
        out,
        vec![
            "namespace app-x (Terminating 5m0s)".to_owned(),
            "└─ waits on ConfigMap app-x/cfg (Terminating)  #1: its content".to_owned(),
            "   └─ waits on finalizer example.com/cleanup: owner dead  ← root: RemoveFinalizers (step 1)  #2: no live owner".to_owned(),
        ]
    );
}

#[test]
fn long_evidence_is_cut_in_the_tree_and_whole_in_json() {
    let why = "every source read and none shows the owner; ".repeat(40);
    let g = chain(&why);
    let out = lines(&g);
    let last = out.last().unwrap();
    assert_eq!(last.chars().count(), LINE_WIDTH, "{last}");
    assert!(last.ends_with('…'), "{last}");
    assert!(last.contains("← root: RemoveFinalizers (step 1)"), "{last}");
    let json = serde_json::to_value(&g).unwrap();
    assert_eq!(json["edges"][1]["why"], why.as_str());
    assert_eq!(json["edges"][1]["finding"], 2);
    assert_eq!(json["roots"][0]["remedy"]["step"], 1);
    assert_eq!(json["nodes"][2]["state"], "dead");
    assert_eq!(json["targets"][0], "ns");
    let back: BlockerGraph = serde_json::from_value(json).unwrap();
    assert_eq!(back, g);
}

#[test]
fn many_children_are_counted_not_listed() {
    let mut g = chain("x");
    for k in 0..(MAX_CHILDREN + 3) {
        let id = format!("o{k}");
        g.nodes
            .push(node(&id, NodeKind::Object, &id, NodeState::Terminating));
        g.edges.push(edge("ns", &id, "content", 1));
    }
    let out = lines(&g);
    assert!(
        out.iter()
            .any(|l| l == "└─ … and 4 more (the JSON report has them all)"),
        "{out:#?}"
    );
}

#[test]
fn a_node_reached_twice_in_one_tree_is_drawn_once() {
    let mut g = chain("x");
    // The namespace also waits on the key directly: a diamond.
    g.edges.push(edge("ns", "key", "also", 3));
    let out = lines(&g);
    assert_eq!(
        out.iter()
            .filter(|l| l.contains("finalizer example.com/cleanup"))
            .count(),
        2
    );
    assert!(out.iter().any(|l| l.contains("(see above)")), "{out:#?}");
}

#[test]
fn mermaid_labels_cannot_break_out_of_their_quotes() {
    let nasty = "a \"quoted\" [b] {c} <d> e|f #g; h & `i`\nj";
    let e = escape(nasty);
    for c in ['"', '[', ']', '{', '}', '<', '>', '|', '`', '\n'] {
        assert!(!e.contains(c), "{c:?} in {e}");
    }
    assert_eq!(
        e,
        "a #quot;quoted#quot; #91;b#93; #123;c#125; #lt;d#gt; e#124;f #35;g#59; h #amp; #96;i#96; j"
    );
}

#[test]
fn mermaid_draws_targets_and_roots_with_classes_of_their_own() {
    let mut g = chain("x");
    g.nodes[1].label = "Widget app-x/\"odd|name\"".into();
    let d = flowchart(&g);
    assert!(d.text.starts_with("flowchart TD\n"), "{}", d.text);
    assert!(
        d.text
            .contains("  n0[\"namespace app-x (Terminating 5m0s)\"]"),
        "{}",
        d.text
    );
    assert!(
        d.text
            .contains("n1[\"Widget app-x/#quot;odd#124;name#quot; (Terminating)\"]"),
        "{}",
        d.text
    );
    assert!(
        d.text.contains(
            "n2[\"finalizer example.com/cleanup: owner dead · root: RemoveFinalizers (step 1)\"]"
        ),
        "{}",
        d.text
    );
    assert!(d.text.contains("  n0 -->|\"#35;1\"| n1\n"), "{}", d.text);
    assert!(d.text.contains("  class n0 target\n"), "{}", d.text);
    assert!(d.text.contains("  class n2 root\n"), "{}", d.text);
    assert!(d.text.contains("classDef root "), "{}", d.text);
    assert_eq!((d.drawn, d.left_out), (3, 0));
    assert!(d.fenced().starts_with("```mermaid\nflowchart TD\n"));
}

#[test]
fn mermaid_stops_at_its_node_limit_and_says_so() {
    let mut g = chain("x");
    let extra = mermaid::MAX_NODES + 5;
    for k in 0..extra {
        let id = format!("o{k}");
        g.nodes
            .push(node(&id, NodeKind::Object, &id, NodeState::Terminating));
        g.edges.push(edge("ns", &id, "content", 1));
    }
    let d = flowchart(&g);
    assert_eq!(d.drawn, mermaid::MAX_NODES);
    assert_eq!(d.left_out, 3 + extra - mermaid::MAX_NODES);
    assert!(d.fenced().contains("not drawn"), "{}", d.fenced());
    // No edge names a node that is not drawn.
    let drawn = format!("n{}", mermaid::MAX_NODES);
    assert!(!d.text.contains(&drawn), "{}", d.text);
}

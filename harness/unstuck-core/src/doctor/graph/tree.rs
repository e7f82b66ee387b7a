//! Each stuck target as a tree down to its root causes, for the terminal:
//!
//! ```text
//! namespace app-x (Terminating 5m0s)
//! └─ waits on ConfigMap app-x/cfg (Terminating 4m58s)  #2: its content: ...
//!    └─ waits on finalizer example.com/cleanup: owner dead  ← root: RemoveFinalizers (step 1)  #2: ...
//! ```
//!
//! Lines are kept to [`LINE_WIDTH`] characters: the evidence is cut with
//! `…` (the JSON report has it whole).

use std::collections::HashSet;

use super::{BlockerGraph, GraphEdge, GraphIndex, GraphNode};

/// The longest line the tree prints, in characters.
pub const LINE_WIDTH: usize = 160;
/// How many things one node is shown waiting on before the rest are
/// counted instead.
pub const MAX_CHILDREN: usize = 12;
/// How deep a tree is drawn.
const MAX_DEPTH: usize = 12;

/// The trees, one line each, without indentation of their own.
pub fn lines(graph: &BlockerGraph) -> Vec<String> {
    let graph = GraphIndex::new(graph);
    let mut out = Vec::new();
    for top in graph.tops() {
        let mut seen = HashSet::new();
        seen.insert(top.id.as_str());
        out.push(fit(
            &format!("{}{}", top.describe(), root_mark(&graph, top)),
            "",
        ));
        walk(&graph, top, "", 1, &mut seen, &mut out);
    }
    out
}

fn walk<'a>(
    graph: &GraphIndex<'a>,
    node: &'a GraphNode,
    indent: &str,
    depth: usize,
    seen: &mut HashSet<&'a str>,
    out: &mut Vec<String>,
) {
    let edges: &[&GraphEdge] = graph.waits_on(&node.id);
    let shown = edges.len().min(MAX_CHILDREN);
    for (k, e) in edges.iter().take(shown).enumerate() {
        let last = k + 1 == edges.len();
        let Some(child) = graph.node(&e.to) else {
            continue;
        };
        let again = !seen.insert(child.id.as_str());
        let head = format!(
            "{indent}{}waits on {}{}{}",
            if last { "└─ " } else { "├─ " },
            child.describe(),
            if again {
                " (see above)".to_owned()
            } else {
                root_mark(graph, child)
            },
            match e.finding {
                Some(n) => format!("  #{n}"),
                None => "  node".to_owned(),
            },
        );
        out.push(fit(&head, &e.why));
        if again {
            continue;
        }
        let below = format!("{indent}{}", if last { "   " } else { "│  " });
        if depth >= MAX_DEPTH {
            if !graph.waits_on(&child.id).is_empty() {
                out.push(format!("{below}└─ … (deeper; see the JSON report)"));
            }
            continue;
        }
        walk(graph, child, &below, depth + 1, seen, out);
    }
    if edges.len() > shown {
        out.push(format!(
            "{indent}└─ … and {} more (the JSON report has them all)",
            edges.len() - shown
        ));
    }
}

/// `  ← root: RemoveFinalizers (step 1)` for a root cause.
fn root_mark(graph: &GraphIndex, node: &GraphNode) -> String {
    match graph.root(&node.id) {
        None => String::new(),
        Some(r) => match &r.remedy {
            Some(m) => format!("  ← root: {}", m.line()),
            None => "  ← root: no step planned".to_owned(),
        },
    }
}

/// `head` then `: why`, cut to [`LINE_WIDTH`] characters with `…`. The
/// head is kept whole: it says what waits on what.
fn fit(head: &str, why: &str) -> String {
    let why = why.replace('\n', " ");
    if why.is_empty() {
        return head.to_owned();
    }
    let line = format!("{head}: {why}");
    if line.chars().count() <= LINE_WIDTH {
        return line;
    }
    // No room left for any of the evidence: the head alone.
    if head.chars().count() + 8 >= LINE_WIDTH {
        return head.to_owned();
    }
    shorten(&line, LINE_WIDTH)
}

/// Cuts `s` to `max` characters, ending in `…` when it was longer.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut cut: String = s.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

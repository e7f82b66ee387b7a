//! The graph as a Mermaid `flowchart TD`, for Markdown reports (GitHub
//! job summaries and pull requests render it). Node ids are `n0`, `n1`,
//! ... in drawing order; labels are quoted with every character Mermaid
//! could read as syntax written as an entity code (`#quot;`, `#lt;`, ...).
//! Stuck targets and root causes get classes of their own.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;

use super::tree::shorten;
use super::{BlockerGraph, GraphIndex, GraphNode};

/// The most nodes one diagram draws; the JSON report has the rest.
pub const MAX_NODES: usize = 60;
/// The longest label, in characters.
const MAX_LABEL: usize = 140;

/// A diagram and how much of the graph it leaves out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagram {
    /// The `flowchart TD` text, without the Markdown fence.
    pub text: String,
    /// Nodes drawn.
    pub drawn: usize,
    /// Nodes of the graph not drawn (past [`MAX_NODES`]).
    pub left_out: usize,
}

impl Diagram {
    /// The diagram in a ```` ```mermaid ```` fence, followed by a line
    /// saying what was left out, if anything.
    pub fn fenced(&self) -> String {
        let mut out = format!("```mermaid\n{}```\n", self.text);
        if self.left_out > 0 {
            let _ = writeln!(
                out,
                "\n{} more node(s) not drawn; the JSON report has the whole graph.",
                self.left_out
            );
        }
        out
    }
}

/// The flowchart of `graph`: from each top (stuck targets first) down,
/// breadth first, at most [`MAX_NODES`] nodes. Nodes no edge touches are
/// drawn only if they are targets.
pub fn flowchart(graph: &BlockerGraph) -> Diagram {
    let index = GraphIndex::new(graph);
    let order = drawing_order(&index);
    let wanted = order.len();
    let order: Vec<&GraphNode> = order.into_iter().take(MAX_NODES).collect();
    let ids: HashMap<&str, String> = order
        .iter()
        .enumerate()
        .map(|(k, n)| (n.id.as_str(), format!("n{k}")))
        .collect();
    let mut text = String::from("flowchart TD\n");
    for n in &order {
        let mut label = shorten(&n.describe(), MAX_LABEL);
        if let Some(r) = index.root(&n.id) {
            label.push_str(&match &r.remedy {
                Some(m) => format!(" · root: {}", m.line()),
                None => " · root".to_owned(),
            });
        }
        let _ = writeln!(text, "  {}[\"{}\"]", ids[n.id.as_str()], escape(&label));
    }
    for e in &graph.edges {
        let (Some(from), Some(to)) = (ids.get(e.from.as_str()), ids.get(e.to.as_str())) else {
            continue;
        };
        let label = match e.finding {
            Some(n) => format!("#{n}"),
            None => "node".to_owned(),
        };
        let _ = writeln!(text, "  {from} -->|\"{}\"| {to}", escape(&label));
    }
    let class = |pick: &dyn Fn(&GraphNode) -> bool| -> Vec<&str> {
        order
            .iter()
            .filter(|n| pick(n))
            .map(|n| ids[n.id.as_str()].as_str())
            .collect()
    };
    let target_ids: HashSet<&str> = graph.targets.iter().map(String::as_str).collect();
    let targets = class(&|n| target_ids.contains(n.id.as_str()));
    let roots = class(&|n| index.root(&n.id).is_some());
    text.push_str("  classDef target fill:#e8f0fe,stroke:#1a73e8,color:#202124\n");
    text.push_str("  classDef root fill:#fce8e6,stroke:#d93025,stroke-width:3px,color:#202124\n");
    if !targets.is_empty() {
        let _ = writeln!(text, "  class {} target", targets.join(","));
    }
    if !roots.is_empty() {
        let _ = writeln!(text, "  class {} root", roots.join(","));
    }
    Diagram {
        text,
        drawn: order.len(),
        left_out: wanted - order.len(),
    }
}

/// Tops first, then breadth first along the edges; then whatever edges
/// touch that no top reaches (a cycle).
fn drawing_order<'a>(index: &GraphIndex<'a>) -> Vec<&'a GraphNode> {
    let graph = index.graph;
    let mut seen: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    let mut queue: VecDeque<&GraphNode> = index.tops().into_iter().collect();
    let touched: HashSet<&str> = graph
        .edges
        .iter()
        .flat_map(|e| [e.from.as_str(), e.to.as_str()])
        .collect();
    let rest = graph
        .nodes
        .iter()
        .filter(|n| touched.contains(n.id.as_str()));
    let mut rest = rest.peekable();
    loop {
        while let Some(n) = queue.pop_front() {
            if !seen.insert(n.id.as_str()) {
                continue;
            }
            out.push(n);
            queue.extend(
                index
                    .waits_on(&n.id)
                    .iter()
                    .filter_map(|e| index.node(&e.to)),
            );
        }
        while rest.peek().is_some_and(|n| seen.contains(n.id.as_str())) {
            rest.next();
        }
        match rest.next() {
            Some(n) => queue.push_back(n),
            None => break,
        }
    }
    out
}

/// A label's text as Mermaid reads it inside `["..."]` and `|"..."|`:
/// quotes, brackets, braces, `<`, `>`, `|`, `#`, `&`, `;` and backticks
/// as entity codes, line breaks as spaces.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '#' => out.push_str("#35;"),
            '&' => out.push_str("#amp;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '|' => out.push_str("#124;"),
            '[' => out.push_str("#91;"),
            ']' => out.push_str("#93;"),
            '{' => out.push_str("#123;"),
            '}' => out.push_str("#125;"),
            ';' => out.push_str("#59;"),
            '`' => out.push_str("#96;"),
            '\n' | '\r' | '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

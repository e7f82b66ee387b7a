//! Terminal text and Markdown: one walk over a [`View`], only the marks
//! differ (`## heading` and `- item` in Markdown, `heading:` and indented
//! lines on a terminal; the blocker graph is a tree on a terminal and a
//! Mermaid diagram in Markdown).

use std::fmt::Write as _;

use unstuck_core::doctor::graph::{mermaid, tree, tree::shorten};

use super::View;

/// The longest evidence line a terminal or Markdown report prints whole.
const EVIDENCE_WIDTH: usize = 240;

/// The report as terminal text (`md: false`) or Markdown.
pub(super) fn render(v: &View, md: bool) -> String {
    let mut w = Writer {
        o: String::new(),
        md,
    };
    w.head(v);
    w.findings(v);
    w.normal_so_far(v);
    w.graph(v);
    w.plan(v);
    w.nodes(v);
    w.applied(v);
    let _ = writeln!(w.o, "\n{}", v.outcome);
    w.o
}

struct Writer {
    o: String,
    md: bool,
}

impl Writer {
    fn heading(&mut self, t: &str) {
        if self.md {
            let _ = writeln!(self.o, "\n## {t}\n");
        } else {
            let _ = writeln!(self.o, "\n{t}:");
        }
    }

    fn item(&mut self, indent: usize, t: &str) {
        let pad = "  ".repeat(indent);
        if self.md {
            let _ = writeln!(self.o, "{pad}- {}", t.replace('\n', " "));
        } else {
            let _ = writeln!(self.o, "{pad}  {t}");
        }
    }

    /// Target, blind spots, scan.
    fn head(&mut self, v: &View) {
        if self.md {
            let _ = writeln!(self.o, "# unstuck doctor\n");
            let _ = writeln!(self.o, "**Target:** {}", v.target.line());
        } else {
            let _ = writeln!(self.o, "target: {}", v.target.line());
        }
        if !v.blind_spots.is_empty() {
            self.heading(&format!(
                "BLIND SPOTS ({}): not read, so not judged",
                v.blind_spots.len()
            ));
            for b in &v.blind_spots {
                self.item(0, &format!("{}: {}", b.what, b.why));
            }
        }
        let scan = format!(
            "scanned {} types {}: {} objects and {} Terminating namespace(s) in scope, in {:.2} s",
            v.scan.types_listed,
            v.scan.scope,
            v.scan.objects_seen,
            v.scan.terminating_namespaces,
            v.scan.seconds
        );
        let _ = writeln!(self.o, "{}{scan}", if self.md { "\n" } else { "" });
    }

    fn normal_so_far(&mut self, v: &View) {
        if v.normal_so_far.is_empty() {
            return;
        }
        self.heading(&format!(
            "terminating, normal so far ({})",
            v.normal_so_far.len()
        ));
        for line in &v.normal_so_far {
            self.item(0, line);
        }
    }

    fn findings(&mut self, v: &View) {
        if v.findings.is_empty() {
            return;
        }
        self.heading(&format!("findings ({})", v.findings.len()));
        for f in &v.findings {
            if self.md {
                let _ = writeln!(
                    self.o,
                    "- #{} **{}** `{}`: {}",
                    f.number, f.kind, f.subject, f.summary
                );
            } else {
                let _ = writeln!(
                    self.o,
                    "  #{} {}: {}",
                    f.number,
                    crate::style::strong(&f.kind),
                    f.summary
                );
            }
            // The owner verdict's evidence alone runs to 1,500 characters:
            // a person reads the start, the JSON keeps all.
            let mut cut = false;
            for e in &f.evidence {
                let short = shorten(e, EVIDENCE_WIDTH);
                cut |= short.len() != e.len();
                self.item(1, &short);
            }
            if cut {
                self.item(1, "(long lines cut; -o json has every line whole)");
            }
        }
    }

    fn graph(&mut self, v: &View) {
        let trees = tree::lines(&v.graph);
        if trees.is_empty() {
            return;
        }
        self.heading(&format!(
            "what waits on what ({} stuck target(s), {} root cause(s))",
            v.graph.targets.len(),
            v.graph.roots.len()
        ));
        if self.md {
            self.o.push_str(&mermaid::flowchart(&v.graph).fenced());
        } else {
            for l in &trees {
                let _ = writeln!(self.o, "  {l}");
            }
        }
    }

    fn plan(&mut self, v: &View) {
        if v.plan.is_empty() {
            return;
        }
        self.heading("plan");
        if self.md {
            let _ = writeln!(self.o, "```");
        }
        for l in &v.plan {
            let _ = writeln!(self.o, "{}{l}", if self.md { "" } else { "  " });
        }
        if self.md {
            let _ = writeln!(self.o, "```");
        }
    }

    fn nodes(&mut self, v: &View) {
        for n in &v.node {
            use crate::doctor::node::HealOutcome::*;
            let name = n.outcome.name();
            let outcome = if self.md {
                name.to_string()
            } else {
                match n.outcome {
                    Recovered | NotStuck | PodNotFound => crate::style::good(name),
                    NotShown | StepNotShown | DryRun => crate::style::note(name),
                    GoneWithLeftovers | GaveUp => crate::style::bad(name),
                }
            };
            self.heading(&format!(
                "node {}: pod {} -> {outcome}{}",
                n.node,
                n.pod,
                if n.force_used { " (FORCE DELETED)" } else { "" }
            ));
            if let Some(s) = &n.summary {
                self.item(0, s);
            }
            for e in &n.evidence {
                self.item(1, e);
            }
            for p in &n.plan {
                self.item(0, &format!("plan: {p}"));
            }
            for d in &n.done {
                self.item(0, &format!("did: {d}"));
            }
        }
    }

    /// What was done, the backups, and how each target ended.
    fn applied(&mut self, v: &View) {
        if !v.applied.is_empty() || !v.backups.is_empty() {
            self.heading("applied");
            for a in &v.applied {
                self.item(0, a);
            }
            for b in &v.backups {
                self.item(0, &format!("backup: {b}"));
            }
        }
        if !v.targets.is_empty() {
            self.heading("targets");
            for t in &v.targets {
                self.item(0, &t.line());
            }
        }
    }
}

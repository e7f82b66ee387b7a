//! The doctor's report for people and for machines: one [`View`] of the
//! facts, in one order (target, blind spots, scan, findings, plan, node,
//! what was done, outcome), rendered as terminal text, Markdown or JSON.
//! Every renderer walks the same view, so the three cannot drift apart.

use std::fmt::Write as _;

use serde::Serialize;
use unstuck_core::doctor::{
    BlockerGraph,
    graph::{mermaid, tree},
};

use super::{BlindSpot, DoctorReport, StepOutcome, node::NodeDoctorReport, target::Target};
use unstuck_core::doctor::graph::tree::shorten;

/// The output formats of `unstuck doctor --output`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Terminal,
    Json,
    Markdown,
}

/// The longest evidence line a terminal or Markdown report prints whole.
const EVIDENCE_WIDTH: usize = 240;

/// Everything a report says, in the order it says it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct View {
    pub target: Target,
    pub blind_spots: Vec<BlindSpot>,
    pub scan: Scan,
    pub findings: Vec<FindingView>,
    /// What waits on what, from each stuck target down to its root causes
    /// (the first round's findings and plan, and the node doctor's).
    pub graph: BlockerGraph,
    /// The dry-run plan, one line each (empty when the plan was applied).
    pub plan: Vec<String>,
    pub node: Vec<NodeView>,
    /// What was done, one line each (empty in a dry run).
    pub applied: Vec<String>,
    pub backups: Vec<String>,
    /// With --apply: how each stuck target ended (gone, still stuck and
    /// why, refused and why).
    pub targets: Vec<super::settle::TargetOutcome>,
    /// The closing sentence.
    pub outcome: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scan {
    pub types_listed: usize,
    pub objects_seen: usize,
    pub seconds: f64,
    /// Where the namespaced types were listed: `cluster-wide` or the
    /// namespaces named.
    pub scope: String,
    /// Terminating namespaces in that scope (a namespace is not among
    /// the objects listed in it).
    pub terminating_namespaces: usize,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FindingView {
    /// From 1, in report order: the plan's steps cite it (`finding #2`).
    pub number: usize,
    pub kind: String,
    pub subject: String,
    pub summary: String,
    pub evidence: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    pub node: String,
    pub pod: String,
    pub outcome: String,
    pub force_used: bool,
    pub summary: Option<String>,
    pub evidence: Vec<String>,
    pub plan: Vec<String>,
    pub done: Vec<String>,
}

impl View {
    pub fn new(target: Target, report: &DoctorReport, nodes: &[NodeDoctorReport]) -> Self {
        let first = report.rounds.first();
        let blind_spots = first
            .map(|r| r.collect.blind_spots.clone())
            .unwrap_or_default();
        let scan = first.map_or(
            Scan {
                types_listed: 0,
                objects_seen: 0,
                seconds: 0.0,
                scope: report.scope.clone(),
                terminating_namespaces: 0,
            },
            |r| Scan {
                types_listed: r.collect.types_listed,
                objects_seen: r.collect.objects_seen,
                seconds: r.collect.duration.as_secs_f64(),
                scope: report.scope.clone(),
                terminating_namespaces: r
                    .snapshot
                    .namespaces
                    .iter()
                    .filter(|n| n.metadata.deletion_timestamp.is_some())
                    .filter(|n| {
                        report.scope_namespaces.as_ref().is_none_or(|names| {
                            n.metadata.name.as_ref().is_some_and(|x| names.contains(x))
                        })
                    })
                    .count(),
            },
        );
        let findings = report
            .initial_findings()
            .iter()
            .enumerate()
            .map(|(i, f)| FindingView {
                number: i + 1,
                kind: f.kind.as_str().to_string(),
                subject: f.subject.to_string(),
                summary: f.summary.clone(),
                evidence: f.evidence.clone(),
            })
            .collect();
        let plan = match first {
            Some(r) if !report.applied_changes && !r.plan.is_empty() => {
                r.plan.render_dry_run().lines().map(str::to_owned).collect()
            }
            _ => Vec::new(),
        };
        let node = nodes.iter().map(node_view).collect();
        let graph = first.map_or_else(BlockerGraph::default, |r| {
            let on_nodes: Vec<_> = nodes.iter().filter_map(|n| n.initial.as_ref()).collect();
            BlockerGraph::build_with_nodes(&r.findings, &r.plan, &r.snapshot, &on_nodes)
        });
        let mut applied: Vec<String> = report
            .rounds
            .iter()
            .flat_map(|r| &r.applied)
            .filter_map(|a| match &a.outcome {
                StepOutcome::Done(d) => Some(format!("{} {}: {d}", a.action, a.target)),
                StepOutcome::Failed(why) | StepOutcome::Moved(why) => {
                    Some(format!("FAILED {} {}: {why}", a.action, a.target))
                }
                StepOutcome::Left(why) => Some(format!("left {} {}: {why}", a.action, a.target)),
                StepOutcome::Refused(why) => Some(format!("refused: {why}")),
                StepOutcome::Skipped(why) => {
                    Some(format!("skipped {} {}: {why}", a.action, a.target))
                }
                StepOutcome::Waiting(_) => None,
            })
            .collect();
        // A step left or refused in one round is usually planned, and
        // left or refused, again in the next (a pod that cannot start is
        // refused every round): say each line once.
        let mut seen = std::collections::HashSet::new();
        applied.retain(|l| seen.insert(l.clone()));
        let backups = report.backups().map(|b| b.display().to_string()).collect();
        let nothing = report.initial_findings().is_empty() && nodes.is_empty();
        let gated = first.is_some_and(|r| {
            r.plan
                .steps
                .iter()
                .any(|s| s.action.needs_webhook_consent())
        });
        let gated_conversion = first.is_some_and(|r| {
            r.plan
                .steps
                .iter()
                .any(|s| s.action.needs_conversion_consent())
        });
        let outcome = if nothing {
            "nothing stuck found".to_string()
        } else if report.applied_changes {
            let left = report.left().len();
            let gone = report
                .outcomes
                .iter()
                .filter(|t| t.state == super::settle::TargetState::Gone)
                .count();
            format!(
                "applied in {} round(s): {gone} of {} stuck target(s) gone{}",
                report.rounds.len(),
                report.outcomes.len(),
                if left > 0 {
                    format!(
                        "; {left} step(s) left, not in the confirmed plan: run the doctor again to review them"
                    )
                } else {
                    String::new()
                }
            )
        } else {
            format!(
                "dry run: nothing was changed. Re-run with --apply to carry out the plan{}{}.",
                if gated {
                    " (and --allow-webhook-changes for the webhook step)"
                } else {
                    ""
                },
                if gated_conversion {
                    " (and --allow-crd-conversion-changes for the CRD conversion step)"
                } else {
                    ""
                }
            )
        };
        View {
            target,
            blind_spots,
            scan,
            findings,
            graph,
            plan,
            node,
            applied,
            backups,
            targets: report.outcomes.clone(),
            outcome,
        }
    }

    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Terminal => self.text(false),
            Format::Markdown => self.text(true),
            Format::Json => serde_json::to_string_pretty(self).unwrap_or_default() + "\n",
        }
    }

    /// Terminal text and Markdown share one walk; only the marks differ.
    fn text(&self, md: bool) -> String {
        let mut o = String::new();
        let heading = |o: &mut String, t: &str| {
            if md {
                let _ = writeln!(o, "\n## {t}\n");
            } else {
                let _ = writeln!(o, "\n{t}:");
            }
        };
        let item = |o: &mut String, indent: usize, t: &str| {
            let pad = "  ".repeat(indent);
            if md {
                let _ = writeln!(o, "{pad}- {}", t.replace('\n', " "));
            } else {
                let _ = writeln!(o, "{pad}  {t}");
            }
        };
        if md {
            let _ = writeln!(o, "# unstuck doctor\n");
            let _ = writeln!(o, "**Target:** {}", self.target.line());
        } else {
            let _ = writeln!(o, "target: {}", self.target.line());
        }
        if !self.blind_spots.is_empty() {
            heading(
                &mut o,
                &format!(
                    "BLIND SPOTS ({}): not read, so not judged",
                    self.blind_spots.len()
                ),
            );
            for b in &self.blind_spots {
                item(&mut o, 0, &format!("{}: {}", b.what, b.why));
            }
        }
        let scan = format!(
            "scanned {} types {}: {} objects and {} Terminating namespace(s) in scope, in {:.2} s",
            self.scan.types_listed,
            self.scan.scope,
            self.scan.objects_seen,
            self.scan.terminating_namespaces,
            self.scan.seconds
        );
        if md {
            let _ = writeln!(o, "\n{scan}");
        } else {
            let _ = writeln!(o, "{scan}");
        }
        if !self.findings.is_empty() {
            heading(&mut o, &format!("findings ({})", self.findings.len()));
            for f in &self.findings {
                if md {
                    let _ = writeln!(
                        o,
                        "- #{} **{}** `{}`: {}",
                        f.number, f.kind, f.subject, f.summary
                    );
                } else {
                    let _ = writeln!(o, "  #{} {}: {}", f.number, f.kind, f.summary);
                }
                // The owner verdict's evidence alone runs to 1,500
                // characters: a person reads the start, the JSON keeps all.
                let mut cut = false;
                for e in &f.evidence {
                    let short = shorten(e, EVIDENCE_WIDTH);
                    cut |= short.len() != e.len();
                    item(&mut o, 1, &short);
                }
                if cut {
                    item(&mut o, 1, "(long lines cut; -o json has every line whole)");
                }
            }
        }
        let trees = tree::lines(&self.graph);
        if !trees.is_empty() {
            heading(
                &mut o,
                &format!(
                    "what waits on what ({} stuck target(s), {} root cause(s))",
                    self.graph.targets.len(),
                    self.graph.roots.len()
                ),
            );
            if md {
                o.push_str(&mermaid::flowchart(&self.graph).fenced());
            } else {
                for l in &trees {
                    let _ = writeln!(o, "  {l}");
                }
            }
        }
        if !self.plan.is_empty() {
            heading(&mut o, "plan");
            if md {
                let _ = writeln!(o, "```");
            }
            for l in &self.plan {
                let _ = writeln!(o, "{}{l}", if md { "" } else { "  " });
            }
            if md {
                let _ = writeln!(o, "```");
            }
        }
        for n in &self.node {
            heading(
                &mut o,
                &format!(
                    "node {}: pod {} -> {}{}",
                    n.node,
                    n.pod,
                    n.outcome,
                    if n.force_used { " (FORCE DELETED)" } else { "" }
                ),
            );
            if let Some(s) = &n.summary {
                item(&mut o, 0, s);
            }
            for e in &n.evidence {
                item(&mut o, 1, e);
            }
            for p in &n.plan {
                item(&mut o, 0, &format!("plan: {p}"));
            }
            for d in &n.done {
                item(&mut o, 0, &format!("did: {d}"));
            }
        }
        if !self.applied.is_empty() || !self.backups.is_empty() {
            heading(&mut o, "applied");
            for a in &self.applied {
                item(&mut o, 0, a);
            }
            for b in &self.backups {
                item(&mut o, 0, &format!("backup: {b}"));
            }
        }
        if !self.targets.is_empty() {
            heading(&mut o, "targets");
            for t in &self.targets {
                item(&mut o, 0, &t.line());
            }
        }
        let _ = writeln!(o, "\n{}", self.outcome);
        o
    }
}

fn node_view(r: &NodeDoctorReport) -> NodeView {
    NodeView {
        node: r.node.clone(),
        pod: r.pod.clone(),
        outcome: format!("{:?}", r.outcome),
        force_used: r.force_used,
        summary: r.initial.as_ref().map(|f| f.summary.clone()),
        evidence: r
            .initial
            .as_ref()
            .map(|f| f.evidence.clone())
            .unwrap_or_default(),
        plan: r
            .plan
            .iter()
            .map(|s| {
                format!(
                    "{}{}: {}",
                    if s.force { "[FORCE, last resort] " } else { "" },
                    s.remedy.name(),
                    s.why
                )
            })
            .collect(),
        done: r
            .steps
            .iter()
            .map(|s| format!("{}: {}", s.step.remedy.name(), s.actions.join("; ")))
            .collect(),
    }
}

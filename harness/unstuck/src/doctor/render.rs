//! The doctor's report for people and for machines: one [`View`] of the
//! facts, in one order (target, blind spots, scan, findings, plan, node,
//! what was done, outcome), rendered as terminal text, Markdown or JSON.
//! Every renderer walks the same view, so the three cannot drift apart.

mod text;

use serde::Serialize;
use unstuck_core::doctor::{
    Action, ApiCall, BlockedStep, BlockerGraph, FindingDetail, ObjectRef, PlannedStep,
};

use super::{BlindSpot, DoctorReport, StepOutcome, node::NodeDoctorReport, target::Target};

/// The output formats of `unstuck doctor --output`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Terminal,
    Json,
    Markdown,
}

/// What the doctor's JSON says it is: its schema
/// (`docs/doctor-report.schema.json`) and that schema's version. A field
/// may be added within a version; one removed or changed takes a new one.
pub const SCHEMA_VERSION: &str = "unstuck.dev/doctor-report/v2";

/// Everything a report says, in the order it says it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct View {
    pub schema_version: &'static str,
    pub target: Target,
    pub blind_spots: Vec<BlindSpot>,
    pub scan: Scan,
    pub findings: Vec<FindingView>,
    /// Being deleted, not stuck yet: under `--stuck-after`, or a pod
    /// inside its grace period, with when that ends.
    pub normal_so_far: Vec<String>,
    /// What waits on what, from each stuck target down to its root causes
    /// (the first round's findings and plan, and the node doctor's).
    pub graph: BlockerGraph,
    /// The dry-run plan, one line each (empty when the plan was applied).
    pub plan: Vec<String>,
    /// The first round's plan as data (also when it was applied): each
    /// step's action with its target and keys, its API call, why, and
    /// what blocks it.
    pub plan_steps: Vec<PlanStepView>,
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
    /// The subject as data: apiVersion, kind, namespace, name, UID.
    pub object: ObjectRef,
    pub summary: String,
    pub evidence: Vec<String>,
    /// The facts the finding rests on, by kind (`type`): for a finalizer,
    /// the verdict on each key's owner (`verdicts[].verdict`).
    pub detail: FindingDetail,
}

/// One step of the plan, as data.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanStepView {
    /// From 1, as the dry run numbers it.
    pub step: usize,
    /// The finding it remedies (its `number`).
    pub finding: usize,
    /// What it does, with its target and keys (`type` names the action).
    pub action: Action,
    /// The write it makes; none for a wait or a refusal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_call: Option<ApiCall>,
    /// Why, in the doctor's words.
    pub why: String,
    pub force_level: u8,
    /// Webhooks that reject this step's write while their backend does
    /// not serve.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<BlockedView>,
}

/// A webhook in the way of a step's write.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedView {
    /// The finding that names the webhook (its `number`).
    pub webhook_finding: usize,
    pub webhook: String,
    /// Its backend Service, `namespace/name`.
    pub service: String,
    /// How the call fails, when it was seen failing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing: Option<String>,
}

impl From<&BlockedStep> for BlockedView {
    fn from(b: &BlockedStep) -> Self {
        Self {
            webhook_finding: b.webhook_finding + 1,
            webhook: b.webhook.clone(),
            service: b.service.clone(),
            failing: b.failing.clone(),
        }
    }
}

impl PlanStepView {
    fn new(number: usize, s: &PlannedStep, blocked: Vec<BlockedView>) -> Self {
        Self {
            step: number,
            finding: s.finding_index + 1,
            action: s.action.clone(),
            api_call: s.action.api_call(),
            why: s.rationale.clone(),
            force_level: s.force_level,
            blocked_by: blocked,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    pub node: String,
    pub pod: String,
    pub outcome: crate::doctor::node::HealOutcome,
    pub force_used: bool,
    pub summary: Option<String>,
    pub evidence: Vec<String>,
    pub plan: Vec<String>,
    pub done: Vec<String>,
}

impl View {
    pub fn new(target: Target, report: &DoctorReport) -> Self {
        let nodes: Vec<&NodeDoctorReport> = report.node.reports().collect();
        let first = report.rounds.first();
        let blind_spots = first
            .map(|r| r.collect.blind_spots.clone())
            .unwrap_or_default();
        let scan = scan_of(report);
        let findings = report
            .initial_findings()
            .iter()
            .enumerate()
            .map(|(i, f)| FindingView {
                number: i + 1,
                kind: f.kind().as_str().to_string(),
                subject: f.subject.to_string(),
                object: f.subject.clone(),
                summary: f.summary.clone(),
                evidence: f.evidence.clone(),
                detail: f.detail.clone(),
            })
            .collect();
        let plan = match first {
            Some(r) if !report.applied_changes && !r.plan.is_empty() => {
                r.plan.render_dry_run().lines().map(str::to_owned).collect()
            }
            _ => Vec::new(),
        };
        let plan_steps = first.map_or_else(Vec::new, |r| {
            r.plan
                .steps
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let blocked = r
                        .plan
                        .blockers_of(s.finding_index)
                        .map(Into::into)
                        .collect();
                    PlanStepView::new(i + 1, s, blocked)
                })
                .collect()
        });
        let node = nodes.iter().copied().map(node_view).collect();
        let graph = first.map_or_else(BlockerGraph::default, |r| {
            let on_nodes: Vec<_> = nodes.iter().filter_map(|n| n.initial.as_ref()).collect();
            BlockerGraph::build_with_nodes(&r.findings, &r.plan, &r.snapshot, &on_nodes)
        });
        let applied = applied_lines(report);
        let backups = report.backups().map(|b| b.display().to_string()).collect();
        let outcome = closing_line(report, &nodes);
        View {
            schema_version: SCHEMA_VERSION,
            target,
            blind_spots,
            scan,
            findings,
            normal_so_far: report.normal_so_far.iter().map(|n| n.line()).collect(),
            graph,
            plan,
            plan_steps,
            node,
            applied,
            backups,
            targets: report.outcomes.clone(),
            outcome,
        }
    }

    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Terminal => text::render(self, false),
            Format::Markdown => text::render(self, true),
            // Strings, numbers and maps keyed by strings: nothing in it
            // can fail to serialise.
            Format::Json => {
                serde_json::to_string_pretty(self).expect("a doctor report serialises") + "\n"
            }
        }
    }
}

/// What the first round read, and where.
fn scan_of(report: &DoctorReport) -> Scan {
    let Some(r) = report.rounds.first() else {
        return Scan {
            types_listed: 0,
            objects_seen: 0,
            seconds: 0.0,
            scope: report.scope.clone(),
            terminating_namespaces: 0,
        };
    };
    let in_scope = |n: &&k8s_openapi::api::core::v1::Namespace| {
        report
            .scope_namespaces
            .as_ref()
            .is_none_or(|names| n.metadata.name.as_ref().is_some_and(|x| names.contains(x)))
    };
    Scan {
        types_listed: r.collect.types_listed,
        objects_seen: r.collect.objects_seen,
        seconds: r.collect.duration.as_secs_f64(),
        scope: report.scope.clone(),
        terminating_namespaces: r
            .snapshot
            .namespaces
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some())
            .filter(in_scope)
            .count(),
    }
}

/// One line per step taken, failed, left, refused or skipped (waits say
/// nothing); each line once, as later rounds repeat what they refuse.
fn applied_lines(report: &DoctorReport) -> Vec<String> {
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
            StepOutcome::Skipped(why) => Some(format!("skipped {} {}: {why}", a.action, a.target)),
            StepOutcome::Waiting(_) => None,
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    applied.retain(|l| seen.insert(l.clone()));
    applied
}

/// The closing sentence: nothing found, how the applied run ended, or
/// what a dry run would need.
fn closing_line(report: &DoctorReport, nodes: &[&NodeDoctorReport]) -> String {
    let first = report.rounds.first();
    if report.initial_findings().is_empty() && nodes.is_empty() {
        return match report.normal_so_far.len() {
            0 => "nothing stuck found".to_string(),
            n => format!(
                "nothing stuck found; {n} object(s) terminating, normal so far (listed above with when each would count as stuck)"
            ),
        };
    }
    if report.applied_changes {
        let left = report.left().len();
        let gone = report
            .outcomes
            .iter()
            .filter(|t| t.state == super::settle::TargetState::Gone)
            .count();
        let pods_left = nodes.iter().filter(|n| n.outcome.is_left()).count();
        return format!(
            "applied in {} round(s): {gone} of {} stuck target(s) gone{}{}",
            report.rounds.len(),
            report.outcomes.len(),
            if left > 0 {
                format!(
                    "; {left} step(s) left, not in the confirmed plan: run the doctor again to review them"
                )
            } else {
                String::new()
            },
            if pods_left > 0 {
                format!(
                    "; {pods_left} pod(s) on a node left (NotShown, StepNotShown above), not in the confirmed plan: run the doctor again to review them"
                )
            } else {
                String::new()
            }
        );
    }
    let needs = |pred: fn(&unstuck_core::doctor::Action) -> bool| {
        first.is_some_and(|r| r.plan.steps.iter().any(|s| pred(&s.action)))
    };
    format!(
        "dry run: nothing was changed. Re-run with --apply to carry out the plan{}{}.",
        if needs(unstuck_core::doctor::Action::needs_webhook_consent) {
            " (and --allow-webhook-changes for the webhook step)"
        } else {
            ""
        },
        if needs(unstuck_core::doctor::Action::needs_conversion_consent) {
            " (and --allow-crd-conversion-changes for the CRD conversion step)"
        } else {
            ""
        }
    )
}

fn node_view(r: &NodeDoctorReport) -> NodeView {
    NodeView {
        node: r.node.clone(),
        pod: r.pod.clone(),
        outcome: r.outcome,
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

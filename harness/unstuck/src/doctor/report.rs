//! What a doctor run saw and did: its API rounds and, when it was given
//! the cluster's node, its node half ([`NodeHalf`]).

use std::{path::PathBuf, time::Duration};

use serde::Serialize;
use unstuck_core::doctor::{Finding, FindingKind, Plan};

use super::{
    apply::{ApiCall, AppliedStep, StepOutcome},
    collect::CollectStats,
    node::NodeHalf,
    settle,
};

/// One round of the doctor.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    /// What the round saw (kept out of the JSON report: it holds every
    /// pod and event; save it separately with `doctor --save-snapshot`).
    #[serde(skip)]
    pub snapshot: unstuck_core::doctor::Snapshot,
    pub collect: CollectStats,
    pub findings: Vec<Finding>,
    pub plan: Plan,
    pub applied: Vec<AppliedStep>,
}

/// Everything the doctor saw and did.
#[derive(Clone, Debug, Serialize)]
pub struct DoctorReport {
    pub applied_changes: bool,
    pub rounds: Vec<Round>,
    /// How long the API half took (each pod of the node half has its own
    /// timings).
    pub duration: Duration,
    /// With `apply`: how each stuck target of the first round ended.
    pub outcomes: Vec<settle::TargetOutcome>,
    /// Where the doctor looked: `cluster-wide`, `in namespace(s) a, b`.
    pub scope: String,
    /// The namespaces of that scope; `None` for the whole cluster.
    #[serde(skip)]
    pub scope_namespaces: Option<Vec<String>>,
    /// What the first look saw being deleted that is not stuck yet (under
    /// `--stuck-after`, or a pod inside its grace period), in scope.
    pub normal_so_far: Vec<unstuck_core::doctor::normal::NormalSoFar>,
    /// The node half, when the doctor was given the cluster's node: each
    /// stuck pod on it looked at, or healed with `apply` and consent (kept
    /// out of the JSON: a scenario run writes each pod's report on its
    /// own, the doctor's report renders them in its `node` section).
    #[serde(skip)]
    pub node: NodeHalf,
}

impl DoctorReport {
    /// Findings of the first round: what was wrong before any remedy.
    pub fn initial_findings(&self) -> &[Finding] {
        self.rounds
            .first()
            .map(|r| r.findings.as_slice())
            .unwrap_or_default()
    }
    pub fn found(&self, kind: FindingKind) -> bool {
        self.initial_findings().iter().any(|f| f.kind() == kind)
    }
    pub fn calls(&self) -> impl Iterator<Item = &ApiCall> {
        self.rounds
            .iter()
            .flat_map(|r| r.applied.iter().flat_map(|a| a.calls.iter()))
    }
    pub fn backups(&self) -> impl Iterator<Item = &PathBuf> {
        self.rounds
            .iter()
            .flat_map(|r| r.applied.iter().filter_map(|a| a.backup.as_ref()))
    }
    /// `Action target: detail` for every applied step whose outcome `pick` selects.
    fn step_lines(&self, pick: impl Fn(&StepOutcome) -> Option<&String>) -> Vec<String> {
        self.rounds
            .iter()
            .flat_map(|r| r.applied.iter())
            .filter_map(|a| {
                pick(&a.outcome).map(|detail| format!("{} {}: {detail}", a.action, a.target))
            })
            .collect()
    }

    /// The remedies carried out.
    pub fn done(&self) -> Vec<String> {
        self.step_lines(|o| match o {
            StepOutcome::Done(d) => Some(d),
            _ => None,
        })
    }

    /// The remedy steps that failed, with the server's words.
    pub fn failures(&self) -> Vec<String> {
        self.step_lines(|o| match o {
            StepOutcome::Failed(why) | StepOutcome::Moved(why) => Some(why),
            _ => None,
        })
    }

    /// The steps left because no one confirmed them, once each.
    pub fn left(&self) -> Vec<String> {
        let mut lines = self.step_lines(|o| match o {
            StepOutcome::Left(why) => Some(why),
            _ => None,
        });
        let mut seen = std::collections::HashSet::new();
        lines.retain(|l| seen.insert(l.clone()));
        lines
    }

    /// One line per finding and remedy, for terminals and reports.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for f in self.initial_findings() {
            out.push(format!("{}: {}", f.kind().as_str(), f.summary));
        }
        for r in &self.rounds {
            for a in &r.applied {
                match &a.outcome {
                    StepOutcome::Done(d) => out.push(format!("  {} {}: {d}", a.action, a.target)),
                    StepOutcome::Refused(why) => out.push(format!("  refused: {why}")),
                    StepOutcome::Skipped(why) => {
                        out.push(format!("  skipped {} {}: {why}", a.action, a.target))
                    }
                    StepOutcome::Failed(why) | StepOutcome::Moved(why) => {
                        out.push(format!("  FAILED {} {}: {why}", a.action, a.target))
                    }
                    StepOutcome::Left(why) => {
                        out.push(format!("  left {} {}: {why}", a.action, a.target))
                    }
                    _ => {}
                }
            }
        }
        // Later rounds repeat what they refuse or leave: each line once.
        let mut seen = std::collections::HashSet::new();
        out.retain(|l| seen.insert(l.clone()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_repeated_by_later_rounds_is_said_once() {
        let round = |done: &str| {
            Round {
            snapshot: Default::default(),
            collect: Default::default(),
            findings: Vec::new(),
            plan: Default::default(),
            applied: vec![
                AppliedStep {
                    action: "Refuse".into(),
                    target: "-".into(),
                    outcome: StepOutcome::Refused(
                        "Pod app/web-0 is not stuck in deletion; what keeps it from starting is fixed in its spec, image or node, not by the doctor".into(),
                    ),
                    calls: Vec::new(),
                    backup: None,
                },
                AppliedStep {
                    action: "RemoveFinalizers".into(),
                    target: done.into(),
                    outcome: StepOutcome::Done("removed [x.example.com/f]".into()),
                    calls: Vec::new(),
                    backup: None,
                },
            ],
        }
        };
        let report = DoctorReport {
            applied_changes: true,
            rounds: vec![round("configmaps/app/a"), round("configmaps/app/b")],
            duration: Duration::ZERO,
            outcomes: Vec::new(),
            scope: "cluster-wide".into(),
            scope_namespaces: None,
            normal_so_far: Vec::new(),
            node: Default::default(),
        };
        let lines = report.summary_lines();
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains("refused: Pod app/web-0"))
                .count(),
            1,
            "{lines:#?}"
        );
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains("RemoveFinalizers"))
                .count(),
            2
        );
    }
}

//! The doctor's I/O half: collect a snapshot, hand it to the pure
//! diagnosis and planning in [`unstuck_core::doctor`], and apply the plan
//! step by step, re-checking the cluster between rounds. Usable on its own
//! against any cluster (`unstuck doctor`), dry-run unless told otherwise.

pub mod apply;
pub mod collect;
pub mod collect_owners;
pub mod node;

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use kube::Client;
use serde::Serialize;
use unstuck_core::doctor::{
    DiagnoseOptions, Finding, FindingDetail, FindingKind, Plan, diagnose, plan,
};

pub use self::{
    apply::{ApiCall, AppliedStep, StepOutcome},
    collect::{CollectError, CollectStats, collect},
};

/// Which objects the doctor may look at and act on.
#[derive(Clone, Debug, Default)]
pub enum Scope {
    /// The whole cluster.
    #[default]
    Cluster,
    /// Findings about these namespaces, objects in them, and cluster-scoped
    /// registrations (APIServices) that block them.
    Namespaces(Vec<String>),
}

impl Scope {
    fn admits(&self, f: &Finding) -> bool {
        let Scope::Namespaces(names) = self else {
            return true;
        };
        match (&f.subject.namespace, f.subject.kind.as_str(), &f.detail) {
            (Some(ns), _, _) => names.contains(ns),
            (None, "Namespace", _) => names.contains(&f.subject.name),
            // A cluster-scoped blocker (a dead APIService or webhook) is in
            // scope once it blocks one of the namespaces; before that, it
            // could block any of them.
            (
                None,
                _,
                FindingDetail::ApiService {
                    blocks_namespaces, ..
                }
                | FindingDetail::Webhook {
                    blocks_namespaces, ..
                },
            ) => {
                blocks_namespaces.is_empty() || blocks_namespaces.iter().any(|b| names.contains(b))
            }
            (None, _, _) => true,
        }
    }
}

#[derive(Clone, Debug)]
pub struct DoctorOptions {
    pub scope: Scope,
    /// Make changes; otherwise only report the plan (the default).
    pub apply: bool,
    /// Where manifests are saved before any change.
    pub backup_dir: PathBuf,
    pub diagnose: DiagnoseOptions,
    /// Rounds of collect → diagnose → plan → apply; a round that finds
    /// nothing to change ends early.
    pub max_rounds: usize,
    /// May change admission webhooks (make a dead one fail open). Separate
    /// from `apply` on purpose: it weakens a policy, so it is asked for by
    /// name (`--allow-webhook-changes`).
    pub allow_webhook_changes: bool,
}

impl DoctorOptions {
    pub fn dry_run(backup_dir: PathBuf) -> Self {
        Self {
            scope: Scope::Cluster,
            apply: false,
            backup_dir,
            diagnose: DiagnoseOptions::default(),
            max_rounds: 3,
            allow_webhook_changes: false,
        }
    }
}

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
    pub duration: Duration,
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
        self.initial_findings().iter().any(|f| f.kind == kind)
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
            StepOutcome::Failed(why) => Some(why),
            _ => None,
        })
    }

    /// One line per finding and remedy, for terminals and reports.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for f in self.initial_findings() {
            out.push(format!("{}: {}", f.kind.as_str(), f.summary));
        }
        for r in &self.rounds {
            for a in &r.applied {
                match &a.outcome {
                    StepOutcome::Done(d) => out.push(format!("  {} {}: {d}", a.action, a.target)),
                    StepOutcome::Skipped(why) if a.action == "Refuse" => {
                        out.push(format!("  refused: {why}"))
                    }
                    StepOutcome::Skipped(why) if a.action != "Wait" => {
                        out.push(format!("  skipped {} {}: {why}", a.action, a.target))
                    }
                    StepOutcome::Failed(why) => {
                        out.push(format!("  FAILED {} {}: {why}", a.action, a.target))
                    }
                    _ => {}
                }
            }
        }
        out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    #[error(transparent)]
    Collect(#[from] CollectError),
}

/// What the doctor finds in `snapshot` within its scope (no I/O).
pub fn findings_in(
    snapshot: &unstuck_core::doctor::Snapshot,
    opts: &DoctorOptions,
) -> Vec<Finding> {
    diagnose(snapshot, &opts.diagnose)
        .into_iter()
        .filter(|f| opts.scope.admits(f))
        .collect()
}

/// Runs the doctor.
pub async fn run(client: &Client, opts: &DoctorOptions) -> Result<DoctorReport, DoctorError> {
    run_from(client, opts, None).await
}

/// Runs the doctor; its first round diagnoses `first` when given (a
/// snapshot the caller has just collected and judged), later rounds
/// collect afresh.
pub async fn run_from(
    client: &Client,
    opts: &DoctorOptions,
    mut first: Option<(unstuck_core::doctor::Snapshot, CollectStats)>,
) -> Result<DoctorReport, DoctorError> {
    let start = Instant::now();
    let mut rounds = Vec::new();
    for _ in 0..opts.max_rounds.max(1) {
        let (snapshot, stats) = match first.take() {
            Some(s) => s,
            None => collect(client).await?,
        };
        let findings = findings_in(&snapshot, opts);
        let plan = plan(&findings, &snapshot);
        let mut applied = Vec::new();
        if opts.apply {
            for step in &plan.steps {
                applied.push(
                    if step.action.needs_webhook_consent() && !opts.allow_webhook_changes {
                        apply::not_consented(step)
                    } else {
                        apply::apply_step(client, step, &opts.backup_dir).await
                    },
                );
            }
        }
        let changed = applied
            .iter()
            .any(|a| matches!(a.outcome, StepOutcome::Done(_)));
        rounds.push(Round {
            snapshot,
            collect: stats,
            findings,
            plan,
            applied,
        });
        if !opts.apply || !changed {
            break;
        }
        // Let controllers react (the namespace controller re-syncs, objects go) before looking again.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    Ok(DoctorReport {
        applied_changes: opts.apply,
        rounds,
        duration: start.elapsed(),
    })
}

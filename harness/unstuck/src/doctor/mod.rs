//! The doctor's I/O half: collect a snapshot, hand it to the pure
//! diagnosis and planning in [`unstuck_core::doctor`], and apply the plan
//! step by step, re-checking the cluster between rounds. Usable on its own
//! against any cluster (`unstuck doctor`), dry-run unless told otherwise.

pub mod apply;
mod clock;
pub mod collect;
pub mod collect_owners;
pub mod consent;
pub mod node;
pub mod outcome;
mod pages;
mod probe;
pub mod recheck;
pub mod render;
mod scope;
pub mod settle;
pub mod target;
mod versions;

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use kube::Client;
use serde::Serialize;
use unstuck_core::doctor::{DiagnoseOptions, Finding, FindingKind, Plan, diagnose, plan_assuming};

pub use self::{
    apply::{ApiCall, AppliedStep, StepOutcome},
    collect::{BlindSpot, CollectError, CollectScope, CollectStats, collect, collect_in},
    consent::{AskAgain, Consent},
    scope::Scope,
};

#[derive(Clone, Debug)]
pub struct DoctorOptions {
    pub scope: Scope,
    /// Make changes; otherwise only report the plan (the default).
    pub apply: bool,
    /// Where manifests are saved before any change.
    pub backup_dir: PathBuf,
    pub diagnose: DiagnoseOptions,
    /// Rounds of collect → diagnose → plan → apply; a round that finds
    /// nothing to change (and nothing to wait for) ends the run.
    pub max_rounds: usize,
    /// The longest a run with `apply` goes on waiting for the cluster to
    /// answer its remedies ([`settle`]) before it reports where it stands.
    pub settle_budget: Duration,
    /// May change admission webhooks (make a dead one fail open). Separate
    /// from `apply` on purpose: it weakens a policy, so it is asked for by
    /// name (`--allow-webhook-changes`).
    pub allow_webhook_changes: bool,
    /// The CRDs whose dead conversion webhook may be switched to strategy
    /// `None` when no schema difference is found
    /// (`--allow-crd-conversion-changes=CRD`): asked for by the CRD's
    /// name, as it changes how every object of the type is read and what
    /// the webhook did cannot be checked.
    pub allow_crd_conversion_changes: Vec<String>,
    /// The cluster's node, when the doctor was given it (a cluster unstuck
    /// made): what it offers beyond the API — kube-controller-manager's
    /// metrics on a local cluster — says why a namespace is not
    /// progressing.
    pub node: Option<std::sync::Arc<crate::node::AnyNode>>,
    /// What `apply` may change ([`consent`]); by default nothing was
    /// confirmed, so every step that changes the cluster is left.
    pub consent: Consent,
    /// Say on stderr what the run is waiting for, and how long at most
    /// (`unstuck doctor --apply` waits up to minutes for the cluster to
    /// settle; a person should not face silence).
    pub progress: bool,
}

impl DoctorOptions {
    pub fn dry_run(backup_dir: PathBuf) -> Self {
        Self {
            scope: Scope::Cluster,
            apply: false,
            backup_dir,
            diagnose: DiagnoseOptions::default(),
            max_rounds: 10,
            settle_budget: Duration::from_secs(5 * 60),
            allow_webhook_changes: false,
            allow_crd_conversion_changes: Vec::new(),
            node: None,
            consent: Consent::default(),
            progress: false,
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
            out.push(format!("{}: {}", f.kind.as_str(), f.summary));
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

/// With a Terminating namespace, reads kube-controller-manager's namespace
/// workqueue into the snapshot where the node offers it (a local
/// cluster's, within `kcm_metrics::TIMEOUT`), and only when a namespace
/// could need it.
async fn add_controller_manager_metrics(
    snapshot: &mut unstuck_core::doctor::Snapshot,
    opts: &DoctorOptions,
) {
    let terminating = snapshot
        .namespaces
        .iter()
        .any(|n| n.metadata.deletion_timestamp.is_some());
    if let Some(node) = &opts.node
        && terminating
        && snapshot.controller_manager_metrics.is_none()
    {
        // A node that cannot say leaves the judgement to the API alone.
        snapshot.controller_manager_metrics =
            node.controller_manager_metrics().await.unwrap_or_else(|e| {
                tracing::debug!("controller-manager metrics: {e}");
                None
            });
    }
}

/// Runs the doctor.
pub async fn run(client: &Client, opts: &DoctorOptions) -> Result<DoctorReport, DoctorError> {
    run_from(client, opts, None).await
}

/// Runs the doctor; its first round diagnoses `first` when given (a
/// snapshot the caller has just collected and judged, or the one a plan
/// was shown from), later rounds collect afresh. With `apply`, only what
/// `opts.consent` covers is applied; nobody is asked about the rest.
pub async fn run_from(
    client: &Client,
    opts: &DoctorOptions,
    first: Option<(unstuck_core::doctor::Snapshot, CollectStats)>,
) -> Result<DoctorReport, DoctorError> {
    run_asking(client, opts, first, &mut consent::NobodyToAsk).await
}

/// [`run_from`], asking `ask` about steps consent does not cover.
pub async fn run_asking(
    client: &Client,
    opts: &DoctorOptions,
    mut first: Option<(unstuck_core::doctor::Snapshot, CollectStats)>,
    ask: &mut dyn AskAgain,
) -> Result<DoctorReport, DoctorError> {
    let start = Instant::now();
    let deadline = start + opts.settle_budget;
    let mut consent = opts.consent.clone();
    let mut rounds: Vec<Round> = Vec::new();
    let mut waits = settle::Waits::default();
    let mut rounds_left = opts.max_rounds.max(1);
    while rounds_left > 0 {
        rounds_left -= 1;
        let ((mut snapshot, stats), just_read) = match first.take() {
            Some(s) => (s, false),
            None => (collect_in(client, &opts.scope.collect_scope()).await?, true),
        };
        add_controller_manager_metrics(&mut snapshot, opts).await;
        let findings = findings_in(&snapshot, opts);
        let plan = plan_assuming(&findings, &snapshot, &opts.diagnose.assume_dead);
        let applied = if opts.apply {
            tracing::debug!(target: crate::STEP_LOG, "doctor apply begins ({} planned step(s))", plan.steps.len());
            recheck::apply_round(client, opts, &findings, &plan, just_read, &mut consent, ask)
                .await?
        } else {
            Vec::new()
        };
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
        if !opts.apply {
            break;
        }
        let last = rounds.last().expect("just pushed");
        if changed {
            // Let the cluster answer (the namespace controller's next
            // pass, the garbage collector, a kubelet's sync) before
            // looking again: until what was stuck moves, or a bound.
            let before = settle::fingerprint(&last.snapshot, &opts.scope);
            settle::wait_for_change(client, opts, &before, deadline).await;
            continue;
        }
        if !settle::look_again(client, opts, &rounds, &mut waits, deadline).await {
            break;
        }
        rounds_left += 1;
    }
    let outcomes = if opts.apply {
        settle::outcomes(&rounds)
    } else {
        Vec::new()
    };
    let normal_so_far = rounds
        .first()
        .map(|r| {
            unstuck_core::doctor::normal::normal_so_far(
                &r.snapshot,
                opts.diagnose.stuck_after,
                &r.findings,
            )
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|n| {
            let ns = match n.subject.kind.as_str() {
                "Namespace" => Some(n.subject.name.as_str()),
                _ => n.subject.namespace.as_deref(),
            };
            opts.scope.covers_namespace(ns)
        })
        .collect();
    Ok(DoctorReport {
        applied_changes: opts.apply,
        normal_so_far,
        rounds,
        duration: start.elapsed(),
        outcomes,
        scope: opts.scope.describe(),
        scope_namespaces: opts.scope.namespaces().map(<[String]>::to_vec),
    })
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

    /// The collector's reads run together; unboxed, their joined future
    /// once outgrew a tokio worker's stack in debug builds.
    #[tokio::test]
    async fn the_collect_future_stays_small() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = Client::try_from(config).unwrap();
        let scope = CollectScope::Cluster;
        let outer = collect_in(&client, &scope);
        assert!(
            std::mem::size_of_val(&outer) <= 1024,
            "{}",
            std::mem::size_of_val(&outer)
        );
    }
}

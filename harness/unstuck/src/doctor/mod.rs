//! The doctor's I/O half: collect a snapshot, hand it to the pure
//! diagnosis and planning in [`unstuck_core::doctor`], and apply the plan
//! step by step, re-checking the cluster between rounds (`rounds`);
//! given the node of a cluster unstuck made, look at (or heal) the pods
//! stuck on it ([`node`]). One entry point, [`run_asking`] (with [`run`]
//! and [`run_from`] for its defaults), for `unstuck doctor` and a
//! scenario's doctor step alike; usable on its own against any cluster,
//! dry-run unless told otherwise.

pub mod apply;
mod clock;
pub mod collect;
pub mod collect_owners;
pub mod consent;
pub mod node;
mod node_metrics;
pub mod outcome;
mod pages;
mod probe;
pub mod recheck;
pub mod render;
mod report;
mod rounds;
mod scope;
pub mod settle;
pub mod target;
mod versions;

use std::{path::PathBuf, time::Duration};

use kube::Client;
use unstuck_core::doctor::{DiagnoseOptions, Finding, diagnose};

pub use self::{
    apply::{ApiCall, AppliedStep, StepOutcome},
    collect::{BlindSpot, CollectError, CollectScope, CollectStats, collect, collect_in},
    consent::{AskAgain, Consent},
    report::{DoctorReport, Round},
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
    /// progressing, and the pods stuck on it are the node half's
    /// ([`run_asking`]).
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

/// Runs the doctor ([`run_asking`]) on a fresh read, asking nobody.
pub async fn run(client: &Client, opts: &DoctorOptions) -> Result<DoctorReport, DoctorError> {
    run_from(client, opts, None).await
}

/// Runs the doctor ([`run_asking`]) from `first` when given; with
/// `apply`, only what `opts.consent` covers is applied, nobody is asked
/// about the rest.
pub async fn run_from(
    client: &Client,
    opts: &DoctorOptions,
    first: Option<(unstuck_core::doctor::Snapshot, CollectStats)>,
) -> Result<DoctorReport, DoctorError> {
    run_asking(client, opts, first, &mut consent::NobodyToAsk).await
}

/// The doctor, for the command and the scenario runner alike: the API
/// half (`rounds`), then, when it was given the cluster's node
/// (`opts.node`: a cluster unstuck made), the node half: every pod stuck
/// on the node within the scope, looked at, or with `apply` healed as far
/// as consent goes ([`Consent::on_node`]): a scenario run's every pod and
/// rung, a person's only the pods and rungs shown. A pod the node half
/// freed counts as gone among the outcomes. The node half's errors are in
/// the report ([`node::NodeHalf`]), for the caller to fail on or to list.
///
/// Its first round diagnoses `first` when given (a snapshot the caller
/// has just collected and judged, or the one a plan was shown from), later
/// rounds collect afresh. What consent does not cover is put to `ask`.
pub async fn run_asking(
    client: &Client,
    opts: &DoctorOptions,
    first: Option<(unstuck_core::doctor::Snapshot, CollectStats)>,
    ask: &mut dyn AskAgain,
) -> Result<DoctorReport, DoctorError> {
    let mut report = rounds::api_half(client, opts, first, ask).await?;
    if let Some(node) = &opts.node {
        let heal = node::HealOptions {
            apply: opts.apply,
            stuck_after: opts.diagnose.stuck_after,
            ..node::HealOptions::default()
        };
        let consented = opts
            .consent
            .on_node(matches!(opts.scope, Scope::Run { .. }));
        let within = |p: &node::StuckPod| opts.scope.covers_namespace(Some(&p.namespace));
        report.node = node::heal_stuck(client, node.as_ref(), &heal, within, consented).await;
        let healed: Vec<_> = report.node.reports().collect();
        outcome::count_node_heals(&mut report.outcomes, &healed);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

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

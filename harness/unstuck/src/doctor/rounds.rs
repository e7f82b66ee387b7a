//! The doctor's API half: rounds of collect, diagnose, plan and, with
//! `apply`, apply what consent covers, re-checking the cluster between
//! rounds ([`super::settle`]).

use std::time::Instant;

use kube::Client;
use unstuck_core::doctor::plan_assuming;

use super::{
    AskAgain, CollectStats, DoctorError, DoctorOptions, DoctorReport, Round, StepOutcome,
    collect_in, findings_in, node::NodeHalf, recheck, settle,
};

/// The API half: rounds of collect, diagnose, plan and (with `apply`)
/// apply, until nothing moves or the budget is spent; then how each stuck
/// target ended. `duration` is this half's.
pub(super) async fn api_half(
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
        super::node_metrics::add_controller_manager_metrics(&mut snapshot, opts).await;
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
        node: NodeHalf::default(),
    })
}

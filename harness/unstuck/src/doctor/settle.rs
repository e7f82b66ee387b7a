//! Applying until settled: after a round changed something, the doctor
//! waits for the cluster to answer (the namespace controller's next pass,
//! the garbage collector, a kubelet's next sync) before it looks again,
//! and at the end says, per stuck target, whether it is gone.
//!
//! A remedy can reveal the next blocker only later: a webhook made to fail
//! open lets the namespace controller delete a custom resource, which then
//! hangs on its own dead finalizer. Ending the run there ("applied in 2
//! rounds", exit 0, namespace still Terminating) is what issue 18 saw.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use kube::Client;
use unstuck_core::doctor::{Action, Snapshot, plan::RefusalKind};

pub use super::outcome::{
    TargetOutcome, TargetState, expected_keys, outcomes, target_namespaces, targets,
};
use super::{DoctorOptions, Round, Scope, StepOutcome, collect_in};
use crate::text::quoted_list;

/// How long the doctor waits, after a round that changed something, for
/// what it stuck in scope to move. The namespace controller retries a
/// failing namespace with exponential backoff (up to minutes after a long
/// failure), so this is generous; it ends early the moment anything moves.
pub const SETTLE_WAIT: Duration = Duration::from_secs(90);

/// How often the cluster is read while waiting.
const POLL: Duration = Duration::from_secs(2);

/// What of the cluster, in scope, tells whether stuck things moved: every
/// object being deleted (UID and finalizers), every Terminating namespace
/// (its conditions' messages), every pod being deleted.
pub fn fingerprint(s: &Snapshot, scope: &Scope) -> BTreeSet<String> {
    let in_scope = |ns: Option<&str>| scope.covers_namespace(ns);
    let mut out = BTreeSet::new();
    for r in s.terminating.iter().filter(|r| in_scope(r.namespace())) {
        out.insert(format!(
            "object {} {}",
            r.metadata.uid.as_deref().unwrap_or_default(),
            quoted_list(r.finalizers())
        ));
    }
    for ns in &s.namespaces {
        let name = ns.metadata.name.as_deref().unwrap_or_default();
        if ns.metadata.deletion_timestamp.is_none() || !in_scope(Some(name)) {
            continue;
        }
        let conditions: Vec<String> = ns
            .status
            .iter()
            .flat_map(|st| st.conditions.iter().flatten())
            .map(|c| {
                format!(
                    "{}={} {}",
                    c.type_,
                    c.status,
                    c.message.as_deref().unwrap_or("")
                )
            })
            .collect();
        out.insert(format!(
            "namespace {name} {} {conditions}",
            quoted_list(ns.metadata.finalizers.as_deref().unwrap_or_default()),
            conditions = quoted_list(&conditions)
        ));
    }
    for p in &s.pods {
        if p.metadata.deletion_timestamp.is_some() && in_scope(p.metadata.namespace.as_deref()) {
            out.insert(format!(
                "pod {}",
                p.metadata.uid.as_deref().unwrap_or_default()
            ));
        }
    }
    out
}

/// Waits until what was stuck in scope moves (or [`SETTLE_WAIT`], or
/// `deadline`). `before` is the fingerprint of the read the round's changes
/// were argued on. Returns whether it moved.
pub async fn wait_for_change(
    client: &Client,
    opts: &DoctorOptions,
    before: &BTreeSet<String>,
    deadline: Instant,
) -> bool {
    let start = Instant::now();
    let until = deadline.min(start + SETTLE_WAIT);
    let _shown = crate::waiting::show(
        "what was stuck to move (a namespace's controller comes back after its backoff)",
        until.saturating_duration_since(start),
    );
    if opts.progress {
        eprintln!(
            "[doctor] waiting up to {} s for the cluster to move (a namespace's controller comes back after its backoff) ...",
            until.saturating_duration_since(start).as_secs()
        );
    }
    loop {
        tokio::time::sleep(POLL).await;
        if Instant::now() >= until {
            if opts.progress {
                eprintln!(
                    "[doctor] nothing moved in {} s; done waiting",
                    start.elapsed().as_secs()
                );
            }
            return false;
        }
        match collect_in(client, &opts.scope.collect_scope()).await {
            Ok((snapshot, _)) if fingerprint(&snapshot, &opts.scope) != *before => {
                if opts.progress {
                    eprintln!(
                        "[doctor] the cluster moved after {} s; looking again",
                        start.elapsed().as_secs()
                    );
                }
                return true;
            }
            Ok(_) => {}
            // A failed read is no answer: keep waiting until the bound.
            Err(e) => tracing::warn!("reading the cluster while waiting for it to move: {e}"),
        }
    }
}

/// Whether a run that changed something should wait for the cluster once
/// more before it ends: a Terminating namespace it worked on is still
/// there and nothing refused holds it (the namespace controller finishes
/// it on its next pass, which comes after a backoff).
pub fn namespace_pending(rounds: &[Round]) -> bool {
    outcomes(rounds)
        .iter()
        .any(|o| o.state == TargetState::StillStuck && o.target.kind == "Namespace")
}

/// How often one run has waited, with nothing left to change, for each
/// reason (each is bounded: [`look_again`]).
#[derive(Debug, Default)]
pub struct Waits {
    ageing: usize,
    pending: usize,
    discovery: usize,
}

/// How often one run waits for late deletions to age.
const MAX_AGEING_WAITS: usize = 3;
/// How often one run waits for a namespace it worked on to be finished by
/// its controller.
const MAX_PENDING_WAITS: usize = 3;
/// How often a round blocked only by a failed discovery is collected
/// again, two seconds apart.
const DISCOVERY_RETRIES: usize = 5;

/// After a round that changed nothing: whether something is worth
/// waiting for and looking at again (having waited for it). Only once a
/// remedy was made in this run: a run that changed nothing ends at once.
pub async fn look_again(
    client: &Client,
    opts: &DoctorOptions,
    rounds: &[Round],
    waits: &mut Waits,
    deadline: Instant,
) -> bool {
    let remedied = rounds.iter().any(|r| {
        r.applied
            .iter()
            .any(|a| matches!(a.outcome, StepOutcome::Done(_)))
    });
    let Some(last) = rounds.last() else {
        return false;
    };
    if !remedied {
        return false;
    }
    // A remedy can set more deletions going (the garbage collector
    // deletes a foreground chain's next pods, the namespace controller
    // deletes what a webhook no longer rejects): objects that began
    // terminating during this run and are held by a finalizer become
    // "stuck" only once they have aged. Wait for the earliest of them
    // rather than stop with them left.
    let left = deadline.saturating_duration_since(Instant::now());
    if waits.ageing < MAX_AGEING_WAITS
        && let Some(wait) = ageing(&last.snapshot, opts, left)
    {
        waits.ageing += 1;
        let _shown = crate::waiting::show(
            "objects that began deleting during this run to age past --stuck-after",
            wait,
        );
        if opts.progress {
            eprintln!(
                "[doctor] waiting {} s for objects that began deleting during this run to age past --stuck-after ...",
                wait.as_secs().max(1)
            );
        }
        tokio::time::sleep(wait).await;
        return true;
    }
    // A namespace waits on its controller's next pass: wait for anything
    // to move, and look again if it did.
    if waits.pending < MAX_PENDING_WAITS && namespace_pending(rounds) {
        waits.pending += 1;
        let before = fingerprint(&last.snapshot, &opts.scope);
        return wait_for_change(client, opts, &before, deadline).await;
    }
    // A step refused only because discovery failed at that moment (a CRD
    // somewhere being created or removed) is asked again, briefly: a
    // remedy that needs complete discovery, such as /finalize, is taken
    // once discovery answers, never without.
    let blocked_by_discovery = !last.snapshot.discovery_failures.is_empty()
        && last.plan.steps.iter().any(|s| {
            matches!(
                &s.action,
                Action::Refuse {
                    kind: RefusalKind::DiscoveryFailed,
                    ..
                }
            )
        });
    if blocked_by_discovery && waits.discovery < DISCOVERY_RETRIES {
        waits.discovery += 1;
        tokio::time::sleep(Duration::from_secs(2)).await;
        return true;
    }
    false
}

/// How long until the earliest in-scope object that is terminating with a
/// finalizer, but not yet for `stuck_after`, has aged enough to be judged;
/// `None` when there is none within `at_most` (and [`MAX_AGEING_WAIT`]).
fn ageing(
    snapshot: &unstuck_core::doctor::Snapshot,
    opts: &DoctorOptions,
    at_most: Duration,
) -> Option<Duration> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let threshold = opts.diagnose.stuck_after;
    snapshot
        .terminating
        .iter()
        .filter(|r| {
            r.metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
        })
        .filter(|r| opts.scope.covers_namespace(r.namespace()))
        .filter_map(|r| r.deletion_timestamp())
        .map(|ts| ts + threshold + Duration::from_millis(250))
        // Too young to be judged when the snapshot was taken (older ones
        // were judged). One that has aged since is due at once: the run
        // must look again, not wait for the cluster to move.
        .filter(|due| *due > snapshot.taken_at)
        .map(|due| Duration::try_from(due.duration_since(now)).unwrap_or(Duration::ZERO))
        .filter(|left| *left <= at_most.min(MAX_AGEING_WAIT))
        .min()
}

/// The longest the doctor waits for a late deletion to age (see
/// [`ageing`]): the CLI's default threshold is a minute.
const MAX_AGEING_WAIT: Duration = Duration::from_secs(75);

#[cfg(test)]
mod tests;

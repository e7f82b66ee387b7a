//! LoadBalancerCleanupPending: the cleanup key goes only when its owner,
//! the cloud controller manager, is shown dead (or assumed dead) again on
//! re-check, and the step says which load balancer that leaves in the
//! cloud. A live cloud controller that fails is repaired on the cloud's
//! side, never skipped: the key is all that remembers the load balancer.

use std::fmt::Write as _;

use super::{PlannedStep, finalizers::remove_finalizers, refuse, wait};
use crate::doctor::model::{Finding, LoadBalancerCleanup, OwnerVerdict, Snapshot};
use crate::doctor::owner::{OwnerCache, fmt_secs};

pub(super) fn cleanup_pending(
    i: usize,
    f: &Finding,
    lb: &LoadBalancerCleanup,
    snapshot: &Snapshot,
    owners: &OwnerCache,
) -> PlannedStep {
    let verdict = lb.removal.verdicts.first().map(|v| &v.verdict);
    match verdict {
        Some(OwnerVerdict::Dead { .. }) => {
            let mut step = remove_finalizers(i, f, &lb.removal, snapshot, owners);
            if matches!(step.action, super::Action::RemoveFinalizers(_)) {
                let _ = write!(step.rationale, "; {}", leaves_behind(lb));
            }
            step
        }
        Some(OwnerVerdict::Alive { evidence }) => match &lb.failure {
            Some(failure) => refuse(
                i,
                format!(
                    "the cloud controller manager fails to delete {}'s load balancer ({}: {}, {} time(s), last {} ago): repair that on the cloud's side (its credentials, the load balancer's dependencies); the key is never stripped while its owner runs, {}",
                    f.subject,
                    failure.reason,
                    failure.message,
                    failure.count,
                    fmt_secs(failure.last_seen_secs),
                    leaves_behind(lb)
                ),
            ),
            None => wait(
                i,
                format!(
                    "the cloud controller manager removes {}'s cleanup key once its load balancer is deleted",
                    f.subject
                ),
                format!(
                    "its owner is alive ({}); stripping the key would skip the load balancer's deletion",
                    evidence.join("; ")
                ),
            ),
        },
        Some(OwnerVerdict::Unknown { evidence }) => refuse(
            i,
            format!(
                "{}'s cleanup key is removed only when the cloud controller manager is shown dead ({}); {}",
                f.subject,
                evidence.join("; "),
                leaves_behind(lb)
            ),
        ),
        None => refuse(
            i,
            format!("{} finding without a verdict on its key", f.kind()),
        ),
    }
}

/// What a removal leaves in the cloud, in words.
fn leaves_behind(lb: &LoadBalancerCleanup) -> String {
    if lb.ingress.is_empty() {
        "removing the key leaves any load balancer the cloud made for it (its status names none): look for it in the cloud by the Service's name".to_owned()
    } else {
        format!(
            "removing the key leaves its load balancer ({}) in the cloud: delete it there",
            lb.ingress_text()
        )
    }
}

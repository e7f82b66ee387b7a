//! A Service held by its load balancer cleanup key: the Service waits on
//! the key, the key on the cloud controller manager that removes it once
//! the cloud's load balancer is deleted. The controller's state is the
//! key's verdict, or `Failing` when it reports that the cloud refuses.

use super::super::build::Builder;
use super::super::{NodeKind, NodeState};
use super::finalizers::{verdict_line, verdict_state};
use crate::doctor::model::{Finding, LOAD_BALANCER_CLEANUP, LoadBalancerCleanup};

pub(super) fn cleanup_pending(b: &mut Builder, i: usize, f: &Finding, lb: &LoadBalancerCleanup) {
    let Some(v) = lb.removal.verdicts.first() else {
        b.object(&f.subject);
        return;
    };
    let service = b.stuck(&f.subject);
    let state = verdict_state(&v.verdict);
    let key = b.finalizer(
        &service,
        LOAD_BALANCER_CLEANUP,
        state,
        v.assumed_dead.then(|| "assumed: --assume-dead".to_owned()),
    );
    b.edge(&service, &key, verdict_line(v), Some(i));
    let (controller_state, why) = match &lb.failure {
        Some(failure) => (
            NodeState::Failing,
            format!(
                "removed once the load balancer ({}) is deleted, which the cloud refuses: {}: {}",
                lb.ingress_text(),
                failure.reason,
                failure.message
            ),
        ),
        None => (
            state,
            format!(
                "removed by its service controller once the load balancer ({}) is deleted",
                lb.ingress_text()
            ),
        ),
    };
    // One node per Service, not one for the component: its state is what
    // it does for this Service (failing here, waiting there), and the
    // root's remedy is this finding's step.
    let controller = b.node(
        format!("controller:cloud-controller-manager@{service}"),
        NodeKind::Controller,
        "cloud controller manager (service controller)".into(),
        controller_state,
        None,
    );
    b.edge(&key, &controller, why, Some(i));
}

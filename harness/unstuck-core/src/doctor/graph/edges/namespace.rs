//! A Terminating namespace waits on what its conditions and content
//! name: objects, APIServices, webhooks, spec tokens, its controller.

use super::super::build::Builder;
use super::super::{NodeKind, NodeState};
use crate::doctor::model::{
    FinalizerCount, Finding, FindingDetail, NamespaceStall, ObjectRef, ResourceCount, StallCause,
};

/// A namespace waits on the objects still in it that are being deleted
/// with finalizers; without such objects, on what its conditions count.
pub(super) fn namespace_content(
    b: &mut Builder,
    i: usize,
    f: &Finding,
    blocking: &[ObjectRef],
    resources: &[ResourceCount],
    finalizers: &[FinalizerCount],
) {
    let ns = b.stuck(&f.subject);
    for o in blocking {
        let to = b.stuck(o);
        let keys = b
            .record(o)
            .map(|r| r.finalizers().join(", "))
            .unwrap_or_default();
        b.edge(
            &ns,
            &to,
            format!("its content: being deleted, still has finalizers [{keys}]"),
            Some(i),
        );
    }
    if !blocking.is_empty() {
        return;
    }
    for r in resources {
        let to = b.node(
            format!("content:{}:{}", f.subject.name, r.qualified()),
            NodeKind::Content,
            format!("{} in namespace {}", r.qualified(), f.subject.name),
            NodeState::Remaining,
            Some(format!("{} left", r.count)),
        );
        b.edge(
            &ns,
            &to,
            format!(
                "NamespaceContentRemaining counts {} x{}",
                r.qualified(),
                r.count
            ),
            Some(i),
        );
    }
    for k in finalizers {
        let to = b.node(
            format!("content:{}:finalizer:{}", f.subject.name, k.finalizer),
            NodeKind::Content,
            format!(
                "objects with finalizer {} in namespace {}",
                k.finalizer, f.subject.name
            ),
            NodeState::Remaining,
            Some(format!("{} left", k.count)),
        );
        b.edge(
            &ns,
            &to,
            format!(
                "NamespaceFinalizersRemaining counts {} x{}",
                k.finalizer, k.count
            ),
            Some(i),
        );
    }
}

/// A namespace whose deletion fails discovery waits on the APIServices
/// serving the failing group/versions.
pub(super) fn namespace_discovery(
    b: &mut Builder,
    i: usize,
    f: &Finding,
    group_versions: &[String],
    api_services: &[String],
) {
    let ns = b.stuck(&f.subject);
    for (gv, api) in group_versions.iter().zip(api_services) {
        let to = b.api_service(api);
        b.edge(
            &ns,
            &to,
            format!("NamespaceDeletionDiscoveryFailure: discovery of {gv} fails"),
            Some(i),
        );
    }
    if api_services.is_empty() {
        let to = b.node(
            format!("condition:{}:discovery", f.subject.name),
            NodeKind::Condition,
            "discovery failure".into(),
            NodeState::Unknown,
            Some("the condition names no group/version".into()),
        );
        b.edge(&ns, &to, "NamespaceDeletionDiscoveryFailure", Some(i));
    }
}

/// A namespace whose content deletes fail waits on the webhooks its
/// condition names; on the failure itself when it names none.
pub(super) fn content_failure(
    b: &mut Builder,
    i: usize,
    f: &Finding,
    message: &str,
    named: &[String],
) {
    let ns = b.stuck(&f.subject);
    for name in named {
        for hook in b.webhooks_blamed(name, &f.subject.name, message, i) {
            b.edge(
                &ns,
                &hook,
                format!("NamespaceDeletionContentFailure: failed calling webhook \"{name}\""),
                Some(i),
            );
        }
    }
    if named.is_empty() {
        let to = b.node(
            format!("condition:{}:content-deletion", f.subject.name),
            NodeKind::Condition,
            "content deletion failure".into(),
            NodeState::Unknown,
            Some("no finding explains it further".into()),
        );
        b.edge(
            &ns,
            &to,
            format!("NamespaceDeletionContentFailure: {message}"),
            Some(i),
        );
    }
}

/// A namespace waits on the `spec.finalizers` tokens nothing removes.
pub(super) fn spec_tokens(b: &mut Builder, i: usize, f: &Finding, stuck: &[String]) {
    let ns = b.stuck(&f.subject);
    for token in stuck {
        let (state, detail, why) = if token == "kubernetes" {
            (
                NodeState::Unknown,
                "the namespace controller is not known to finish it",
                "spec token \"kubernetes\" is still set: the namespace controller has not finished",
            )
        } else {
            (
                NodeState::NoHandler,
                "only PUT /finalize clears it",
                "spec token has no handler: the namespace controller removes only \"kubernetes\"",
            )
        };
        let to = b.spec_token(&f.subject.name, token, state, detail);
        b.edge(&ns, &to, why, Some(i));
    }
}

/// A namespace the namespace controller is not getting on with waits on
/// that controller; on the APIServices of the namespaces whose condition
/// names a cluster-wide failure, when that is the cause.
pub(super) fn namespace_stall(b: &mut Builder, i: usize, f: &Finding, stall: &NamespaceStall) {
    let ns = b.stuck(&f.subject);
    if stall.cause == StallCause::ClusterWideBlocker {
        let elsewhere: Vec<(String, Vec<String>)> = b
            .findings
            .iter()
            .filter(|g| stall.blocked_elsewhere.contains(&g.subject.name))
            .filter_map(|g| match &g.detail {
                FindingDetail::NamespaceBlockedByDiscovery { api_services, .. } => {
                    Some((g.subject.name.clone(), api_services.clone()))
                }
                _ => None,
            })
            .collect();
        for (other, apis) in &elsewhere {
            for api in apis {
                let to = b.api_service(api);
                b.edge(
                    &ns,
                    &to,
                    format!("a cluster-wide failure: namespace {other}'s condition names APIService {api}, and every namespace deletion needs complete discovery"),
                    Some(i),
                );
            }
        }
        if !elsewhere.is_empty() {
            return;
        }
    }
    if stall.cause == StallCause::ConversionWebhookFailing {
        for crd in &stall.failing_conversions {
            let to = b.crd(
                crd,
                NodeState::FailingClosed,
                Some("conversion strategy Webhook".into()),
            );
            b.edge(
                &ns,
                &to,
                format!("listing its {crd} objects fails on the conversion webhook"),
                Some(i),
            );
        }
        if !stall.failing_conversions.is_empty() {
            return;
        }
    }
    let state = match stall.cause {
        StallCause::ControllerManagerNotLeading => NodeState::NotReady,
        StallCause::NamespaceControllerMissing => NodeState::Gone,
        StallCause::WorkqueueStuck
        | StallCause::ClusterWideBlocker
        | StallCause::ConversionWebhookFailing => NodeState::Failing,
        StallCause::WorkqueueIdle | StallCause::Unknown => NodeState::Unknown,
        #[allow(unreachable_patterns)]
        _ => NodeState::Unknown,
    };
    let to = b.node(
        "controller:namespace".into(),
        NodeKind::Controller,
        "namespace controller (kube-controller-manager)".into(),
        state,
        None,
    );
    b.edge(&ns, &to, stall.cause.explain(), Some(i));
}

//! The edges each finding argues: one function per [`FindingDetail`]
//! variant. A new variant adds one arm to [`add`] (and, if it names a new
//! kind of thing, one constructor in `build.rs`); until then the catch-all
//! arm puts the finding's subject in the graph, so nothing is lost.

use super::NodeState;
use super::build::{Builder, NodePart, object_id};
use crate::doctor::conditions::{FinalizerCount, ResourceCount};
use crate::doctor::finding::{
    FinalizerRemoval, Finding, FindingDetail, FindingKind, ObjectRef, PodStuckHint,
};
use crate::doctor::namespace_stall::{NamespaceStall, StallCause};
use crate::doctor::owner::{FinalizerVerdict, OwnerVerdict};
use crate::doctor::webhook::{ServiceKey, WebhookConfigKind, webhooks};

/// Adds what finding `i` (0-based, in report order) argues.
pub(super) fn add(b: &mut Builder, i: usize, f: &Finding) {
    b.argue(&object_id(&f.subject), i);
    match &f.detail {
        FindingDetail::OrphanFinalizer(rem) => orphan_finalizer(b, i, f, rem),
        FindingDetail::Finalizers { verdicts, .. } => finalizers(b, i, f, verdicts),
        FindingDetail::Dependents { dependents, leaves } => foreground(b, i, f, dependents, leaves),
        FindingDetail::Protected { finalizer, used_by } => protected(b, i, f, finalizer, used_by),
        FindingDetail::NamespaceContent {
            remaining_resources,
            remaining_finalizers,
            blocking_objects,
        } => namespace_content(
            b,
            i,
            f,
            blocking_objects,
            remaining_resources,
            remaining_finalizers,
        ),
        FindingDetail::NamespaceDiscovery {
            group_versions,
            api_services,
            ..
        } => namespace_discovery(b, i, f, group_versions, api_services),
        FindingDetail::ApiService {
            service,
            group_version,
            blocks_namespaces,
            ..
        } => api_service(b, i, f, service, group_version, blocks_namespaces),
        FindingDetail::Webhook {
            configuration,
            configuration_name,
            webhook,
            service,
            backend,
            blocks_namespaces,
            ..
        } => dead_webhook(
            b,
            i,
            DeadWebhook {
                kind: *configuration,
                configuration: configuration_name,
                name: webhook,
                service,
                backend,
                blocks: blocks_namespaces,
            },
        ),
        FindingDetail::NamespaceContentFailure { message, webhooks } => {
            content_failure(b, i, f, message, webhooks)
        }
        FindingDetail::NamespaceSpec { stuck_tokens, .. } => spec_tokens(b, i, f, stuck_tokens),
        FindingDetail::Pod { node, hint, .. } => pod_stuck(b, i, f, node.as_deref(), *hint),
        FindingDetail::PodStart { .. } => {
            let r = &f.subject;
            b.node(
                object_id(r),
                super::NodeKind::Object,
                super::build::object_label(r),
                NodeState::NotStarting,
                None,
            );
        }
        FindingDetail::NamespaceStall(stall) => namespace_stall(b, i, f, stall),
        // Variants added after this module was written: their subject is
        // in the graph, their edges come with their own arm above.
        #[allow(unreachable_patterns)]
        _ => {
            b.object(&f.subject);
        }
    }
}

/// The first line of a verdict's evidence, and how many more there are.
fn verdict_line(v: &FinalizerVerdict) -> String {
    let evidence = v.verdict.evidence();
    let first = evidence
        .first()
        .map(String::as_str)
        .unwrap_or("no evidence");
    let assumed = if v.assumed_dead {
        " (assumed dead: --assume-dead)"
    } else {
        ""
    };
    let more = match evidence.len() {
        0 | 1 => String::new(),
        n => format!(" (+{} more)", n - 1),
    };
    format!(
        "{}: owner {}{assumed}: {first}{more}",
        v.finalizer,
        v.verdict.label()
    )
}

fn verdict_state(v: &OwnerVerdict) -> NodeState {
    match v {
        OwnerVerdict::Dead { .. } => NodeState::Dead,
        OwnerVerdict::Alive { .. } => NodeState::Alive,
        OwnerVerdict::Unknown { .. } => NodeState::Unknown,
    }
}

fn key_edges<'v>(
    b: &mut Builder,
    i: usize,
    f: &Finding,
    verdicts: impl Iterator<Item = &'v FinalizerVerdict>,
) {
    let from = b.stuck(&f.subject);
    for v in verdicts {
        let detail = v.assumed_dead.then(|| "assumed: --assume-dead".to_owned());
        let to = b.finalizer(&from, &v.finalizer, verdict_state(&v.verdict), detail);
        b.edge(&from, &to, verdict_line(v), Some(i));
    }
}

/// An object (or a namespace's metadata) held by keys whose owner is
/// dead. Only the dead keys: the others have findings of their own
/// (alive, unknown, protected), whose steps act on them.
fn orphan_finalizer(b: &mut Builder, i: usize, f: &Finding, rem: &FinalizerRemoval) {
    let dead = rem
        .verdicts
        .iter()
        .filter(|v| rem.orphan.contains(&v.finalizer));
    key_edges(b, i, f, dead);
}

/// Keys whose owner is alive, or not known.
fn finalizers(b: &mut Builder, i: usize, f: &Finding, verdicts: &[FinalizerVerdict]) {
    key_edges(b, i, f, verdicts.iter());
}

/// An owner in foreground deletion waits on its dependents with
/// `blockOwnerDeletion`, down to the leaves: the chain as the snapshot's
/// owner references show it, or straight to the dependents and leaves
/// the finding names when the snapshot does not hold them.
fn foreground(
    b: &mut Builder,
    i: usize,
    f: &Finding,
    dependents: &[ObjectRef],
    leaves: &[ObjectRef],
) {
    let owner = b.stuck(&f.subject);
    let why = |d: &ObjectRef| {
        format!(
            "foregroundDeletion: the garbage collector waits for dependent {} (blockOwnerDeletion) to go",
            super::build::object_label(d)
        )
    };
    let mut seen = std::collections::HashSet::new();
    let mut frontier: Vec<(String, Option<String>)> = vec![(owner.clone(), f.subject.uid.clone())];
    // Owner chains are short; the bound guards against a malformed cycle.
    for _ in 0..8 {
        let mut next = Vec::new();
        for (parent, uid) in &frontier {
            let Some(uid) = uid else { continue };
            for r in b.snapshot.terminating.iter().filter(|r| {
                r.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == *uid && o.block_owner_deletion == Some(true))
            }) {
                let d = ObjectRef {
                    api_version: r.api_version.clone(),
                    kind: r.kind.clone(),
                    namespace: r.namespace().map(str::to_owned),
                    name: r.name().to_owned(),
                    uid: r.metadata.uid.clone(),
                };
                let child = b.stuck(&d);
                // A dependent in foreground deletion of its own argues its
                // part of the chain in its own finding.
                let by = b
                    .findings
                    .iter()
                    .position(|g| {
                        matches!(g.detail, FindingDetail::Dependents { .. })
                            && g.subject.uid.as_deref() == Some(uid.as_str())
                    })
                    .unwrap_or(i);
                b.edge(parent, &child, why(&d), Some(by));
                if seen.insert(child.clone()) {
                    next.push((child, d.uid));
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    for d in dependents.iter().chain(leaves) {
        let child = b.stuck(d);
        if !seen.contains(&child) {
            b.edge(&owner, &child, why(d), Some(i));
        }
    }
}

/// A protection finalizer in use: the object waits on its key, the key on
/// whoever uses the object.
fn protected(b: &mut Builder, i: usize, f: &Finding, key: &str, used_by: &[String]) {
    let from = b.stuck(&f.subject);
    let to = b.finalizer(&from, key, NodeState::InUse, None);
    b.edge(
        &from,
        &to,
        format!("{key} is released once nothing uses it"),
        Some(i),
    );
    for user in used_by {
        let u = user_node(b, user);
        b.edge(&to, &u, format!("in use: {user}"), Some(i));
    }
}

/// Who uses a protected object, as the protection check words it: `pod
/// ns/name (...)`, `volume is Bound to claim ns/name`, `claim ns/name
/// names it in ...`: the object itself where it can be told, so that a
/// user stuck in turn continues the chain.
fn user_node(b: &mut Builder, user: &str) -> String {
    let object = |kind: &str, rest: &str| {
        let name = rest.split([' ', ',', ')']).next().unwrap_or_default();
        let (ns, name) = name.split_once('/')?;
        (!ns.is_empty() && !name.is_empty()).then(|| ObjectRef {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: Some(ns.into()),
            name: name.into(),
            uid: None,
        })
    };
    let parsed = if let Some(rest) = user.strip_prefix("pod ") {
        object("Pod", rest)
    } else if let Some(rest) = user.strip_prefix("volume is Bound to claim ") {
        object("PersistentVolumeClaim", rest)
    } else if let Some(rest) = user.strip_prefix("claim ") {
        object("PersistentVolumeClaim", rest)
    } else {
        None
    };
    match parsed {
        Some(r) => {
            let id = b.object(&r);
            // Present means "seen using it": say so, unless it is stuck.
            b.node(
                id,
                super::NodeKind::Object,
                super::build::object_label(&r),
                NodeState::InUse,
                None,
            )
        }
        None => b.node(
            format!("user:{user}"),
            super::NodeKind::Other,
            user.to_owned(),
            NodeState::InUse,
            None,
        ),
    }
}

/// A namespace waits on the objects still in it that are being deleted
/// with finalizers; without such objects, on what its conditions count.
fn namespace_content(
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
            .snapshot
            .content_of(&f.subject.name)
            .chain(&b.snapshot.terminating)
            .find(|r| r.kind == o.kind && r.name() == o.name && r.metadata.uid == o.uid)
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
            super::NodeKind::Content,
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
            super::NodeKind::Content,
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
fn namespace_discovery(
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
            super::NodeKind::Condition,
            "discovery failure".into(),
            NodeState::Unknown,
            Some("the condition names no group/version".into()),
        );
        b.edge(&ns, &to, "NamespaceDeletionDiscoveryFailure", Some(i));
    }
}

/// An unavailable APIService waits on its Service; the namespaces whose
/// discovery it breaks wait on it.
fn api_service(
    b: &mut Builder,
    i: usize,
    f: &Finding,
    service: &str,
    group_version: &str,
    blocks: &[String],
) {
    let api = b.api_service(&f.subject.name);
    if let Some((namespace, name)) = service.split_once('/') {
        let key = ServiceKey {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let svc = b.service(&key);
        let why = match f.kind {
            FindingKind::DeadApiService => {
                format!("serves {group_version} from Service {key}, proven gone")
            }
            _ => format!("serves {group_version} from Service {key}, not proven gone"),
        };
        b.edge(&api, &svc, why, Some(i));
    }
    for ns in blocks {
        let from = b.stuck(&namespace_ref(ns));
        b.edge(
            &from,
            &api,
            format!("NamespaceDeletionDiscoveryFailure names {group_version}"),
            Some(i),
        );
    }
}

/// The facts of a [`FindingDetail::Webhook`].
struct DeadWebhook<'a> {
    kind: WebhookConfigKind,
    configuration: &'a str,
    name: &'a str,
    service: &'a ServiceKey,
    backend: &'a str,
    blocks: &'a [String],
}

/// A webhook failing closed waits on its Service; the namespaces whose
/// content deletes it rejects wait on it.
fn dead_webhook(b: &mut Builder, i: usize, w: DeadWebhook) {
    let hook = b.webhook(
        w.kind,
        w.configuration,
        w.name,
        NodeState::FailingClosed,
        None,
    );
    let svc = b.service(w.service);
    b.edge(
        &hook,
        &svc,
        format!(
            "failurePolicy Fail and its Service {} has no backend ({})",
            w.service, w.backend
        ),
        Some(i),
    );
    for ns in w.blocks {
        let from = b.stuck(&namespace_ref(ns));
        b.edge(
            &from,
            &hook,
            format!(
                "NamespaceDeletionContentFailure: failed calling webhook \"{}\"",
                w.name
            ),
            Some(i),
        );
    }
}

/// A namespace whose content deletes fail waits on the webhooks its
/// condition names; on the failure itself when it names none.
fn content_failure(b: &mut Builder, i: usize, f: &Finding, message: &str, named: &[String]) {
    let ns = b.stuck(&f.subject);
    for name in named {
        for hook in b.webhooks_named(name, i) {
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
            super::NodeKind::Condition,
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
fn spec_tokens(b: &mut Builder, i: usize, f: &Finding, stuck: &[String]) {
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

/// A pod the kubelet does not finish waits on what its status points at
/// on its node (the node doctor's causes replace this guess when it
/// looked: see `node_causes`).
fn pod_stuck(b: &mut Builder, i: usize, f: &Finding, node: Option<&str>, hint: PodStuckHint) {
    let pod = b.stuck(&f.subject);
    if b.node_doctor_saw(&f.subject) {
        return;
    }
    let node = node.unwrap_or("<none>");
    let s = &f.subject;
    let (to, why) = match hint {
        PodStuckHint::NodeLost => (
            b.on_node(node, NodePart::Kubelet, s, NodeState::NotReady, None),
            "its node does not answer: no kubelet confirms the kill",
        ),
        PodStuckHint::RuntimeKill => (
            b.on_node(node, NodePart::Runtime, s, NodeState::Failing, None),
            "containers still running past grace, or FailedKillPod: the runtime does not stop them",
        ),
        PodStuckHint::VolumeTeardown => (
            b.on_node(node, NodePart::Volumes, s, NodeState::Failing, None),
            "containers gone, the kubelet has not finished: most likely a volume that cannot be unmounted",
        ),
        PodStuckHint::NetworkTeardown => (
            b.on_node(node, NodePart::Network, s, NodeState::Failing, None),
            "FailedKillPod: failed to destroy network for sandbox",
        ),
        PodStuckHint::DeleteRejected => {
            for hook in dead_pod_delete_webhooks(b) {
                b.edge(
                    &pod,
                    &hook,
                    "containers gone; the kubelet's final DELETE is rejected by this webhook",
                    Some(i),
                );
            }
            return;
        }
        PodStuckHint::Unknown => (
            b.on_node(
                node,
                NodePart::Kubelet,
                s,
                NodeState::Unknown,
                Some("the API shows no cause".into()),
            ),
            "the API shows no cause; look at the kubelet on its node",
        ),
        // A hint added after this module: the pod waits on its kubelet.
        #[allow(unreachable_patterns)]
        _ => (
            b.on_node(node, NodePart::Kubelet, s, NodeState::Unknown, None),
            "see the finding",
        ),
    };
    b.edge(&pod, &to, why, Some(i));
}

/// The dead webhooks (those with a DeadWebhook finding) that match pod
/// DELETE.
fn dead_pod_delete_webhooks(b: &mut Builder) -> Vec<String> {
    let dead: Vec<(WebhookConfigKind, String, String)> = b
        .findings
        .iter()
        .filter_map(|g| match &g.detail {
            FindingDetail::Webhook {
                configuration,
                configuration_name,
                webhook,
                ..
            } => Some((*configuration, configuration_name.clone(), webhook.clone())),
            _ => None,
        })
        .collect();
    let matching: Vec<(WebhookConfigKind, String, String)> = webhooks(b.snapshot)
        .into_iter()
        .filter(|w| w.matches_operation_on_pods("DELETE"))
        .map(|w| (w.config_kind, w.config_name.to_owned(), w.name.to_owned()))
        .filter(|w| dead.contains(w))
        .collect();
    matching
        .into_iter()
        .map(|(kind, config, name)| b.webhook(kind, &config, &name, NodeState::FailingClosed, None))
        .collect()
}

/// A namespace the namespace controller is not getting on with waits on
/// that controller; on the APIServices of the namespaces whose condition
/// names a cluster-wide failure, when that is the cause.
fn namespace_stall(b: &mut Builder, i: usize, f: &Finding, stall: &NamespaceStall) {
    let ns = b.stuck(&f.subject);
    if stall.cause == StallCause::ClusterWideBlocker {
        let elsewhere: Vec<(String, Vec<String>)> = b
            .findings
            .iter()
            .filter(|g| stall.blocked_elsewhere.contains(&g.subject.name))
            .filter_map(|g| match &g.detail {
                FindingDetail::NamespaceDiscovery { api_services, .. } => {
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
    let state = match stall.cause {
        StallCause::ControllerManagerNotLeading => NodeState::NotReady,
        StallCause::NamespaceControllerMissing => NodeState::Gone,
        StallCause::WorkqueueStuck | StallCause::ClusterWideBlocker => NodeState::Failing,
        StallCause::WorkqueueIdle | StallCause::Unknown => NodeState::Unknown,
        #[allow(unreachable_patterns)]
        _ => NodeState::Unknown,
    };
    let to = b.node(
        "controller:namespace".into(),
        super::NodeKind::Controller,
        "namespace controller (kube-controller-manager)".into(),
        state,
        None,
    );
    b.edge(&ns, &to, stall.cause.explain(), Some(i));
}

fn namespace_ref(name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: None,
        name: name.to_owned(),
        uid: None,
    }
}

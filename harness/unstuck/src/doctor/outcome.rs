//! How a run with `--apply` ended, per stuck target: the targets of the
//! first round (Terminating namespaces, and stuck objects outside them),
//! and for each whether it is gone, still stuck (what holds it, the next
//! step) or refused (why), read from the last round. Also which
//! namespaces a confirmed plan is about ([`target_namespaces`]), which
//! [`super::consent`] extends the confirmation to.

use std::collections::BTreeSet;

use serde::Serialize;
use unstuck_core::doctor::{
    Action, ApiServiceFacts, ConversionWebhookFacts, DeadWebhookFacts, Finding, FindingDetail,
    FindingKind, ObjectRef, Snapshot,
};

use super::{Round, StepOutcome};

/// Where a stuck target ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TargetState {
    /// It no longer exists.
    Gone,
    /// It is still there; the doctor waits on something or left a step.
    StillStuck,
    /// It is still there and the doctor refused to act on what holds it.
    Refused,
}

/// One stuck target and how the run ended for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TargetOutcome {
    pub target: ObjectRef,
    pub state: TargetState,
    /// What holds it and the next step, when it is not gone.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl TargetOutcome {
    /// One line for a terminal.
    pub fn line(&self) -> String {
        let what = target_text(&self.target);
        match self.state {
            TargetState::Gone => format!("{what}: gone"),
            TargetState::StillStuck => format!("{what}: still stuck: {}", self.detail),
            TargetState::Refused => format!("{what}: refused: {}", self.detail),
        }
    }
}

fn target_text(t: &ObjectRef) -> String {
    match &t.namespace {
        _ if t.kind == "Namespace" => format!("namespace {}", t.name),
        Some(ns) => format!("{} {ns}/{}", t.kind, t.name),
        None => format!("{} {}", t.kind, t.name),
    }
}

fn is_namespace_finding(k: FindingKind) -> bool {
    matches!(
        k,
        FindingKind::NamespaceBlockedByDiscovery
            | FindingKind::NamespaceContentDeletionFailed
            | FindingKind::NamespaceBlockedByContent
            | FindingKind::NamespaceOrphanMetadataFinalizer
            | FindingKind::NamespaceSpecFinalizerStuck
            | FindingKind::NamespaceNotProgressing
    )
}

fn is_stuck_object_finding(k: FindingKind) -> bool {
    matches!(
        k,
        FindingKind::OrphanFinalizer
            | FindingKind::UnknownFinalizerOwner
            | FindingKind::WaitingOnLiveController
            | FindingKind::WaitingOnDependents
            | FindingKind::ProtectedFinalizerInUse
            | FindingKind::PodStuckTerminating
    )
}

/// The stuck targets of a diagnosis: Terminating namespaces, and stuck
/// objects that are not inside one of them (those are part of their
/// namespace's outcome).
pub fn targets(findings: &[Finding]) -> Vec<ObjectRef> {
    let namespaces: BTreeSet<&str> = findings
        .iter()
        .filter(|f| is_namespace_finding(f.kind()))
        .map(|f| f.subject.name.as_str())
        .collect();
    let mut out: Vec<ObjectRef> = Vec::new();
    for f in findings {
        let t = &f.subject;
        let keep = if is_namespace_finding(f.kind()) {
            true
        } else if is_stuck_object_finding(f.kind()) {
            !t.namespace
                .as_deref()
                .is_some_and(|ns| namespaces.contains(ns))
        } else {
            false
        };
        if keep && !out.iter().any(|o| same(o, t)) {
            out.push(t.clone());
        }
    }
    out
}

fn same(a: &ObjectRef, b: &ObjectRef) -> bool {
    a.kind == b.kind && a.namespace == b.namespace && a.name == b.name
}

fn present(s: &Snapshot, t: &ObjectRef) -> bool {
    let uid_ok = |uid: Option<&String>| t.uid.is_none() || uid == t.uid.as_ref();
    if t.kind == "Namespace" && t.api_version == "v1" {
        return s.namespaces.iter().any(|n| {
            n.metadata.name.as_deref() == Some(t.name.as_str()) && uid_ok(n.metadata.uid.as_ref())
        });
    }
    let meta_matches = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        m.name.as_deref() == Some(t.name.as_str())
            && m.namespace == t.namespace
            && uid_ok(m.uid.as_ref())
    };
    s.terminating.iter().any(|r| meta_matches(&r.metadata))
        || s.pods.iter().any(|p| meta_matches(&p.metadata))
}

/// Whether a finding is about `t` (or, for a namespace, about what is in
/// it or what blocks it).
fn concerns(f: &Finding, t: &ObjectRef) -> bool {
    if same(&f.subject, t) {
        return true;
    }
    if t.kind != "Namespace" {
        return match &f.detail {
            FindingDetail::DeadWebhook(DeadWebhookFacts { rejects, .. }) => {
                rejects.iter().any(|r| same(&r.subject, t))
            }
            _ => false,
        };
    }
    let ns = t.name.as_str();
    f.subject.namespace.as_deref() == Some(ns)
        || match &f.detail {
            FindingDetail::DeadWebhook(DeadWebhookFacts {
                blocks_namespaces,
                rejects,
                ..
            }) => {
                blocks_namespaces.iter().any(|b| b == ns)
                    || rejects.iter().any(|r| {
                        r.subject.namespace.as_deref() == Some(ns)
                            || (r.subject.kind == "Namespace" && r.subject.name == ns)
                    })
            }
            FindingDetail::DeadApiService(ApiServiceFacts {
                blocks_namespaces, ..
            })
            | FindingDetail::ApiServiceUnavailable(ApiServiceFacts {
                blocks_namespaces, ..
            })
            | FindingDetail::DeadConversionWebhook(ConversionWebhookFacts {
                blocks_namespaces,
                ..
            }) => blocks_namespaces.iter().any(|b| b == ns),
            _ => false,
        }
}

/// How each target of the first round ended, read from the last round
/// (a read taken after the last change, since the run ends on a round
/// that changes nothing).
pub fn outcomes(rounds: &[Round]) -> Vec<TargetOutcome> {
    let (Some(first), Some(last)) = (rounds.first(), rounds.last()) else {
        return Vec::new();
    };
    targets(&first.findings)
        .into_iter()
        .map(|t| {
            if !present(&last.snapshot, &t) {
                return TargetOutcome {
                    target: t,
                    state: TargetState::Gone,
                    detail: String::new(),
                };
            }
            let (state, detail) = why_still_there(last, &t);
            TargetOutcome {
                target: t,
                state,
                detail,
            }
        })
        .collect()
}

fn why_still_there(last: &Round, t: &ObjectRef) -> (TargetState, String) {
    let related: Vec<usize> = last
        .findings
        .iter()
        .enumerate()
        .filter(|(_, f)| concerns(f, t))
        .map(|(i, _)| i)
        .collect();
    let steps = last
        .plan
        .steps
        .iter()
        .filter(|s| related.contains(&s.finding_index));
    let mut refused = Vec::new();
    let mut waiting = Vec::new();
    let mut mutating = Vec::new();
    for s in steps {
        let n = s.finding_index + 1;
        match &s.action {
            Action::Refuse { reason, .. } => refused.push(format!("finding #{n}: {reason}")),
            Action::Wait { reason } => waiting.push(format!("finding #{n}: {reason}")),
            other => mutating.push(format!("finding #{n}: {} planned", other.name())),
        }
    }
    let left: Vec<String> = last
        .applied
        .iter()
        .filter_map(|a| match &a.outcome {
            StepOutcome::Left(why) | StepOutcome::Failed(why) | StepOutcome::Moved(why) => {
                Some(format!("{} {}: {why}", a.action, a.target))
            }
            _ => None,
        })
        .collect();
    if !refused.is_empty() {
        return (TargetState::Refused, refused.join("; "));
    }
    let mut parts = Vec::new();
    parts.extend(left);
    parts.extend(mutating);
    parts.extend(waiting);
    if parts.is_empty() {
        parts.push("nothing the doctor found explains it any more; run the doctor again".into());
    }
    (TargetState::StillStuck, parts.join("; "))
}

/// The Terminating namespaces a plan's steps target: the namespace of
/// each object a mutating step changes (or the namespace itself), of each
/// object a dead webhook's fail-open is for, and of each object listed as
/// expected in later rounds. Not the namespaces a cluster-wide blocker
/// merely names: consent to delete a dead APIService is no consent to
/// strip finalizers in every namespace it held.
pub fn target_namespaces(
    findings: &[Finding],
    plan: &unstuck_core::doctor::Plan,
    snapshot: &Snapshot,
) -> BTreeSet<String> {
    let terminating = |name: &str| {
        snapshot
            .namespace(name)
            .is_some_and(|n| n.metadata.deletion_timestamp.is_some())
    };
    let mut names: Vec<String> = Vec::new();
    for s in plan.mutating_steps() {
        let Some(f) = findings.get(s.finding_index) else {
            continue;
        };
        if f.subject.kind == "Namespace" {
            names.push(f.subject.name.clone());
        }
        names.extend(f.subject.namespace.clone());
        if let FindingDetail::DeadWebhook(DeadWebhookFacts { rejects, .. }) = &f.detail {
            for r in rejects {
                names.extend(r.subject.namespace.clone());
                if r.subject.kind == "Namespace" {
                    names.push(r.subject.name.clone());
                }
            }
        }
    }
    names.extend(
        plan.expected
            .iter()
            .filter_map(|e| e.object.namespace.clone()),
    );
    names.into_iter().filter(|n| terminating(n)).collect()
}

/// The finalizer keys a plan lists under "Expected in later rounds".
pub fn expected_keys(plan: &unstuck_core::doctor::Plan) -> BTreeSet<String> {
    plan.expected
        .iter()
        .flat_map(|e| e.keys.iter().map(|k| k.finalizer.clone()))
        .collect()
}

/// A pod target the node doctor healed after the API doctor's rounds
/// (the kubelet's own final delete) is gone: one outcome per target,
/// whichever doctor freed it.
pub fn count_node_heals(outcomes: &mut [TargetOutcome], nodes: &[&super::node::NodeDoctorReport]) {
    use super::node::HealOutcome;
    for o in outcomes
        .iter_mut()
        .filter(|o| o.target.kind == "Pod" && o.state != TargetState::Gone)
    {
        let pod = format!(
            "{}/{}",
            o.target.namespace.as_deref().unwrap_or_default(),
            o.target.name
        );
        let healed = nodes.iter().any(|n| {
            n.pod == pod
                && (o.target.uid.is_none() || n.uid == o.target.uid)
                && matches!(n.outcome, HealOutcome::Recovered | HealOutcome::PodNotFound)
        });
        if healed {
            o.state = TargetState::Gone;
            o.detail = "freed by the node doctor (the kubelet's own final delete)".into();
        }
    }
}

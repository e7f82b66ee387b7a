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
use serde::Serialize;
use unstuck_core::doctor::{Action, Finding, FindingDetail, FindingKind, ObjectRef, Snapshot};

use super::{DoctorOptions, Round, Scope, StepOutcome, collect_in};

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
    let in_scope = |ns: Option<&str>| match (scope, ns) {
        (Scope::Cluster, _) => true,
        (Scope::Namespaces(n) | Scope::Run { namespaces: n, .. }, Some(ns)) => {
            n.iter().any(|x| x == ns)
        }
        (_, None) => false,
    };
    let mut out = BTreeSet::new();
    for r in s.terminating.iter().filter(|r| in_scope(r.namespace())) {
        out.insert(format!(
            "object {} {:?}",
            r.metadata.uid.as_deref().unwrap_or_default(),
            r.finalizers()
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
            "namespace {name} {:?} {conditions:?}",
            ns.metadata.finalizers
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
    let until = deadline.min(Instant::now() + SETTLE_WAIT);
    loop {
        tokio::time::sleep(POLL).await;
        if Instant::now() >= until {
            return false;
        }
        // A failed read is no answer: keep waiting until the bound.
        if let Ok((snapshot, _)) = collect_in(client, &opts.scope.collect_scope()).await
            && fingerprint(&snapshot, &opts.scope) != *before
        {
            return true;
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
        .filter(|f| is_namespace_finding(f.kind))
        .map(|f| f.subject.name.as_str())
        .collect();
    let mut out: Vec<ObjectRef> = Vec::new();
    for f in findings {
        let t = &f.subject;
        let keep = if is_namespace_finding(f.kind) {
            true
        } else if is_stuck_object_finding(f.kind) {
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
            FindingDetail::Webhook { rejects, .. } => rejects.iter().any(|r| same(&r.subject, t)),
            _ => false,
        };
    }
    let ns = t.name.as_str();
    f.subject.namespace.as_deref() == Some(ns)
        || match &f.detail {
            FindingDetail::Webhook {
                blocks_namespaces,
                rejects,
                ..
            } => {
                blocks_namespaces.iter().any(|b| b == ns)
                    || rejects.iter().any(|r| {
                        r.subject.namespace.as_deref() == Some(ns)
                            || (r.subject.kind == "Namespace" && r.subject.name == ns)
                    })
            }
            FindingDetail::ApiService {
                blocks_namespaces, ..
            }
            | FindingDetail::ConversionWebhook {
                blocks_namespaces, ..
            } => blocks_namespaces.iter().any(|b| b == ns),
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
            Action::Refuse { reason } => refused.push(format!("finding #{n}: {reason}")),
            Action::Wait { reason } => waiting.push(format!("finding #{n}: {reason}")),
            other => mutating.push(format!("finding #{n}: {} planned", other.name())),
        }
    }
    let left: Vec<String> = last
        .applied
        .iter()
        .filter_map(|a| match &a.outcome {
            StepOutcome::Left(why) | StepOutcome::Failed(why) => {
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

/// The Terminating namespaces a confirmed plan is about: those a step
/// that changes the cluster acts for (the subject's own, or the ones a
/// webhook or APIService step unblocks). Later steps on what hangs inside
/// them are covered by the same confirmation ([`super::consent`]).
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
    let mut out = BTreeSet::new();
    for s in plan.mutating_steps() {
        let Some(f) = findings.get(s.finding_index) else {
            continue;
        };
        let mut names: Vec<String> = Vec::new();
        if f.subject.kind == "Namespace" {
            names.push(f.subject.name.clone());
        }
        names.extend(f.subject.namespace.clone());
        match &f.detail {
            FindingDetail::Webhook {
                blocks_namespaces,
                rejects,
                ..
            } => {
                names.extend(blocks_namespaces.iter().cloned());
                for r in rejects {
                    names.extend(r.subject.namespace.clone());
                    if r.subject.kind == "Namespace" {
                        names.push(r.subject.name.clone());
                    }
                }
            }
            FindingDetail::ApiService {
                blocks_namespaces, ..
            }
            | FindingDetail::ConversionWebhook {
                blocks_namespaces, ..
            } => names.extend(blocks_namespaces.iter().cloned()),
            _ => {}
        }
        out.extend(names.into_iter().filter(|n| terminating(n)));
    }
    out
}

#[cfg(test)]
mod tests;

//! Finalizer keys: an object waits on its keys, a key's state is its
//! owner's verdict; a foreground owner waits on its dependents; a
//! protection key on whoever uses the object.

use super::super::build::{Builder, object_label};
use super::super::{NodeKind, NodeState};
use crate::doctor::model::{FinalizerRemoval, FinalizerVerdict, Finding, ObjectRef, OwnerVerdict};

/// The first line of a verdict's evidence, and how many more there are.
pub(super) fn verdict_line(v: &FinalizerVerdict) -> String {
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

pub(super) fn verdict_state(v: &OwnerVerdict) -> NodeState {
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
pub(super) fn orphan_finalizer(b: &mut Builder, i: usize, f: &Finding, rem: &FinalizerRemoval) {
    let dead = rem
        .verdicts
        .iter()
        .filter(|v| rem.orphan.contains(&v.finalizer));
    key_edges(b, i, f, dead);
}

/// Keys whose owner is alive, or not known.
pub(super) fn finalizers(b: &mut Builder, i: usize, f: &Finding, verdicts: &[FinalizerVerdict]) {
    key_edges(b, i, f, verdicts.iter());
}

/// An owner in foreground deletion waits on its dependents with
/// `blockOwnerDeletion`, down to the leaves: the chain as the snapshot's
/// owner references show it, or straight to the dependents and leaves
/// the finding names when the snapshot does not hold them.
pub(super) fn foreground(
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
            object_label(d)
        )
    };
    let mut seen = std::collections::HashSet::new();
    let mut frontier: Vec<(String, Option<String>)> = vec![(owner.clone(), f.subject.uid.clone())];
    // Owner chains are short; the bound guards against a malformed cycle.
    for _ in 0..8 {
        let mut next = Vec::new();
        for (parent, uid) in &frontier {
            let Some(uid) = uid else { continue };
            for r in b.blocking_dependents(uid).to_vec() {
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
                let by = b.dependents_finding(uid).unwrap_or(i);
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
pub(super) fn protected(b: &mut Builder, i: usize, f: &Finding, key: &str, used_by: &[String]) {
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
                NodeKind::Object,
                object_label(&r),
                NodeState::InUse,
                None,
            )
        }
        None => b.node(
            format!("user:{user}"),
            NodeKind::Other,
            user.to_owned(),
            NodeState::InUse,
            None,
        ),
    }
}

//! Finalizer remedies: removing only the keys whose owner is shown dead
//! again on re-check ([`RemoveFinalizers`]), and the waits and refusals
//! for keys of a live controller, an unknown owner, a protection in use,
//! or an owner in foreground deletion.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    Action, FORCE_REMOVE_FINALIZER, ObjectTarget, PlannedStep, refuse, related_findings, wait,
};
use crate::doctor::model::{
    FinalizerFacts, FinalizerRemoval, Finding, FindingDetail, FindingKind, ObjectRecord,
    OwnerVerdict, Snapshot,
};
use crate::doctor::owner::{OwnerCache, OwnerQuery, protection_in_use};

/// Remove dead keys from one object's `metadata.finalizers`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoveFinalizers {
    /// The object.
    pub target: ObjectTarget,
    /// `metadata.finalizers` as seen (the patch tests exactly this list).
    pub current: Vec<String>,
    /// The keys to remove.
    pub remove: Vec<String>,
}

impl RemoveFinalizers {
    /// `current` without `remove`, order kept.
    pub fn kept(&self) -> Vec<String> {
        self.current
            .iter()
            .filter(|k| !self.remove.contains(k))
            .cloned()
            .collect()
    }

    /// The RFC 6902 patch (`application/json-patch+json`): `test` the UID,
    /// the resourceVersion read (when known) and the whole current
    /// finalizer list, then `replace` the list with the kept keys (`[]`
    /// when none are kept, never `null`). If anything changed since the
    /// read the verdict was argued on, a `test` fails and nothing is
    /// written.
    pub fn json_patch(&self) -> Value {
        let mut ops =
            vec![json!({"op": "test", "path": "/metadata/uid", "value": self.target.uid})];
        if let Some(rv) = &self.target.resource_version {
            ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
        }
        ops.push(json!({"op": "test", "path": "/metadata/finalizers", "value": self.current}));
        ops.push(json!({"op": "replace", "path": "/metadata/finalizers", "value": self.kept()}));
        Value::Array(ops)
    }
}

/// WaitingOnLiveController: its controller removes the key.
pub(super) fn waiting_on_live_controller(i: usize, f: &Finding) -> PlannedStep {
    let evidence = verdict_evidence(f);
    wait(
        i,
        format!("the controller serving {}'s finalizers is alive", f.subject),
        format!(
            "a live controller will remove its finalizer when its cleanup is done; stripping it would skip that cleanup ({evidence})"
        ),
    )
}

/// ProtectedFinalizerInUse: released once nothing uses it.
pub(super) fn protected_in_use(i: usize, f: &Finding) -> PlannedStep {
    let (key, users) = match &f.detail {
        FindingDetail::ProtectedFinalizerInUse { finalizer, used_by } => {
            (finalizer.clone(), used_by.join("; "))
        }
        _ => ("the protection finalizer".to_owned(), String::new()),
    };
    wait(
        i,
        format!(
            "{key} on {} is released once nothing uses it ({users})",
            f.subject
        ),
        format!(
            "{key} is normal while the object is in use and is never stripped; if the user is itself stuck, fix that first"
        ),
    )
}

/// UnknownFinalizerOwner: never stripped on an owner not shown dead.
pub(super) fn unknown_owner(i: usize, f: &Finding) -> PlannedStep {
    refuse(
        i,
        format!(
            "the owner of {}'s finalizer(s) could not be argued dead ({}); a finalizer is removed only when its owner is shown dead: check that the controller runs",
            f.subject,
            verdict_evidence(f)
        ),
    )
}

/// WaitingOnDependents: freed at the chain's leaves, never at the owner.
pub(super) fn waiting_on_dependents(i: usize, f: &Finding, all: &[Finding]) -> PlannedStep {
    let leaves = match &f.detail {
        FindingDetail::WaitingOnDependents { leaves, .. } => leaves.clone(),
        _ => Vec::new(),
    };
    let related = related_findings(all, |g| {
        g.kind() != FindingKind::WaitingOnDependents
            && leaves
                .iter()
                .any(|l| l.uid.is_some() && l.uid == g.subject.uid)
    });
    wait(
        i,
        format!(
            "{}: the garbage collector removes foregroundDeletion once its dependents are gone",
            f.subject
        ),
        format!(
            "foregroundDeletion is never stripped from the owner (its dependents would be orphaned); the chain is freed at its {} leaf object(s){related}",
            leaves.len()
        ),
    )
}

fn verdict_evidence(f: &Finding) -> String {
    match &f.detail {
        FindingDetail::WaitingOnLiveController(FinalizerFacts { verdicts, .. })
        | FindingDetail::UnknownFinalizerOwner(FinalizerFacts { verdicts, .. }) => verdicts
            .iter()
            .map(|v| format!("{}: {}", v.finalizer, v.verdict.evidence().join("; ")))
            .collect::<Vec<_>>()
            .join("; "),
        _ => f.evidence.join("; "),
    }
}

/// The object a finding names, looked up again in the snapshot.
fn find_record(f: &Finding, snapshot: &Snapshot) -> Option<ObjectRecord> {
    let s = &f.subject;
    if s.api_version == "v1" && s.kind == "Namespace" {
        return Some(ObjectRecord::of_namespace(snapshot.namespace(&s.name)?));
    }
    snapshot
        .terminating
        .iter()
        .chain(&snapshot.namespace_content)
        .find(|r| {
            r.api_version == s.api_version
                && r.kind == s.kind
                && r.name() == s.name
                && r.namespace() == s.namespace.as_deref()
                && (s.uid.is_none() || r.metadata.uid == s.uid)
        })
        .cloned()
}

pub(super) fn remove_finalizers(
    i: usize,
    f: &Finding,
    rem: &FinalizerRemoval,
    snapshot: &Snapshot,
    owners: &OwnerCache,
) -> PlannedStep {
    let record = find_record(f, snapshot);
    let (current, resource_version, uid) = match &record {
        Some(r) => (
            r.finalizers().to_vec(),
            r.metadata.resource_version.clone(),
            r.metadata.uid.clone(),
        ),
        None => (
            rem.finalizers.clone(),
            rem.resource_version.clone(),
            f.subject.uid.clone(),
        ),
    };
    let Some(uid) = uid else {
        return refuse(
            i,
            format!(
                "{} has no known uid, so a patch could not be bound to this incarnation",
                f.subject
            ),
        );
    };
    // Re-argue every key against the snapshot: never strip a key whose
    // owner is not dead, or a protection key in use.
    let (remove, notes, why_dead) =
        recheck_keys(i, f, rem, record.as_ref(), &current, snapshot, owners);
    if remove.is_empty() {
        return refuse(
            i,
            format!(
                "no finalizer of {} can be removed on re-check: {}",
                f.subject,
                notes.join("; ")
            ),
        );
    }
    let action = RemoveFinalizers {
        target: ObjectTarget {
            api_version: f.subject.api_version.clone(),
            kind: f.subject.kind.clone(),
            resource: record
                .as_ref()
                .map_or(rem.resource.clone(), |r| r.resource.clone()),
            namespace: f.subject.namespace.clone(),
            name: f.subject.name.clone(),
            uid,
            resource_version,
        },
        current,
        remove,
    };
    let kept = action.kept();
    let mut rationale = format!(
        "remove only [{}] from {}: no live owner ({})",
        action.remove.join(", "),
        f.subject,
        why_dead.join("; ")
    );
    if !kept.is_empty() {
        let _ = write!(rationale, "; [{}] stay", kept.join(", "));
    }
    if !notes.is_empty() {
        let _ = write!(rationale, "; {}", notes.join("; "));
    }
    rationale.push_str("; the patch tests the uid, the resourceVersion and the current list, so a concurrent change makes it fail instead of being overwritten");
    PlannedStep {
        finding_index: i,
        action: Action::RemoveFinalizers(action),
        rationale,
        force_level: FORCE_REMOVE_FINALIZER,
    }
}

/// Each orphan key of `rem` again against the snapshot: the keys to remove,
/// notes on the keys kept, and why each removed key's owner is dead.
fn recheck_keys(
    i: usize,
    f: &Finding,
    rem: &FinalizerRemoval,
    record: Option<&ObjectRecord>,
    current: &[String],
    snapshot: &Snapshot,
    owners: &OwnerCache,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut remove = Vec::new();
    let mut notes = Vec::new();
    let mut why_dead = Vec::new();
    for key in &rem.orphan {
        if !current.contains(key) {
            notes.push(format!("{key} is already gone"));
            continue;
        }
        if let Some(users) = protection_in_use(
            key,
            &f.subject.kind,
            f.subject.namespace.as_deref(),
            &f.subject.name,
            snapshot,
        ) {
            notes.push(format!("{key} is in use ({}), kept", users.join("; ")));
            continue;
        }
        // A key diagnosed dead only by `--assume-dead` stays assumed, and
        // is stripped only while the evidence is still no more than Unknown.
        let assumed: Vec<String> = rem
            .verdicts
            .iter()
            .filter(|v| v.assumed_dead && v.finalizer == *key)
            .map(|v| v.finalizer.clone())
            .collect();
        let recheck = owners.verdict(&OwnerQuery {
            finalizer: key,
            kind: &f.subject.kind,
            record,
            assume_dead: &assumed,
        });
        match recheck.verdict {
            OwnerVerdict::Dead { evidence } => {
                // The checks are the finding's evidence, quoted there in
                // full; the plan says how many were re-read, not them again.
                why_dead.push(if recheck.assumed_dead {
                    format!(
                        "{key}: assumed dead (--assume-dead {key}; the evidence alone is Unknown, see finding #{})",
                        i + 1
                    )
                } else {
                    format!(
                        "{key}: owner Dead again on re-check ({} checks, every source read; see finding #{})",
                        evidence.len(),
                        i + 1
                    )
                });
                remove.push(key.clone());
            }
            other => notes.push(format!(
                "{key}: owner {} on re-check ({}), kept",
                other.label(),
                other.evidence().join("; ")
            )),
        }
    }
    (remove, notes, why_dead)
}

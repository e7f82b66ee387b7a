//! Finalizer-owner findings: stuck objects held by finalizers, judged key
//! by key (orphan, live controller, unknown owner, protection in use), and
//! owners in foreground deletion waiting on stuck dependents.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::SignedDuration;

use super::{Diagnosis, MAX_LISTED, record_key, record_ref};
use crate::doctor::model::{
    FinalizerFacts, FinalizerRemoval, FinalizerVerdict, Finding, FindingDetail,
    LOAD_BALANCER_CLEANUP, ObjectRecord, ObjectRef, OwnerVerdict, display_name, holds_cleanup_key,
};
use crate::doctor::owner::{OwnerQuery, fmt_secs, protection_in_use};
use crate::text::quoted;

/// The garbage collector's finalizer of an owner in foreground deletion.
const FOREGROUND: &str = "foregroundDeletion";

impl<'a> Diagnosis<'a> {
    /// Objects with a deletionTimestamp past the threshold and finalizers,
    /// from `terminating` and `namespace_content`, without duplicates and
    /// without Namespaces (diagnosed from their full objects).
    pub(super) fn stuck_objects(&self) -> Vec<&'a ObjectRecord> {
        let mut out: Vec<&ObjectRecord> = self
            .snapshot
            .terminating
            .iter()
            .chain(&self.snapshot.namespace_content)
            .filter(|r| !(r.api_version == "v1" && r.kind == "Namespace"))
            .filter(|r| !r.finalizers().is_empty())
            .filter(|r| self.is_stuck(&r.metadata).is_some())
            .collect();
        out.sort_by(|a, b| record_key(a).cmp(&record_key(b)));
        out.dedup_by(|a, b| record_key(a) == record_key(b));
        out
    }

    pub(super) fn object(&self, record: &ObjectRecord, findings: &mut Vec<Finding>) {
        let age = self.is_stuck(&record.metadata).unwrap_or_default();
        let mut skip: Vec<&str> = Vec::new();
        if record.finalizers().iter().any(|f| f == FOREGROUND)
            && let Some(f) = self.waiting_on_dependents(record, age)
        {
            findings.push(f);
            skip.push(FOREGROUND);
        }
        if holds_cleanup_key(record) {
            self.load_balancer_cleanup(record, age, findings);
            skip.push(LOAD_BALANCER_CLEANUP);
        }
        if record
            .finalizers()
            .iter()
            .any(|f| !skip.contains(&f.as_str()))
        {
            self.finalizer_findings(record, age, FindingDetail::OrphanFinalizer, &skip, findings);
        }
    }

    /// Terminating objects that name `owner` in an ownerReference with
    /// `blockOwnerDeletion: true`: what its `foregroundDeletion` waits for.
    fn blocking_dependents(&self, owner: &ObjectRecord) -> Vec<&'a ObjectRecord> {
        let Some(uid) = owner.metadata.uid.as_deref() else {
            return Vec::new();
        };
        let mut out: Vec<&ObjectRecord> = self
            .snapshot
            .terminating
            .iter()
            .filter(|r| {
                r.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid && o.block_owner_deletion == Some(true))
            })
            .collect();
        out.sort_by(|a, b| record_key(a).cmp(&record_key(b)));
        out.dedup_by(|a, b| record_key(a) == record_key(b));
        out
    }

    /// An owner in foreground deletion whose blocking dependents are
    /// themselves stuck: walk down to the leaves (dependents that wait on
    /// nothing of their own) and name what holds them.
    fn waiting_on_dependents(&self, owner: &ObjectRecord, age: SignedDuration) -> Option<Finding> {
        let direct = self.blocking_dependents(owner);
        if direct.is_empty() {
            return None;
        }
        let mut leaves: Vec<&ObjectRecord> = Vec::new();
        let mut seen: BTreeSet<&str> = owner.metadata.uid.as_deref().into_iter().collect();
        let mut frontier = direct.clone();
        // Owner chains are short (Deployment -> ReplicaSet -> Pod); the
        // bound only guards against a malformed cycle.
        for _ in 0..8 {
            let mut next = Vec::new();
            for d in frontier {
                if !seen.insert(d.metadata.uid.as_deref().unwrap_or_default()) {
                    continue;
                }
                let below = if d.finalizers().iter().any(|f| f == FOREGROUND) {
                    self.blocking_dependents(d)
                } else {
                    Vec::new()
                };
                if below.is_empty() {
                    leaves.push(d);
                } else {
                    next.extend(below);
                }
            }
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
        leaves.sort_by(|a, b| record_key(a).cmp(&record_key(b)));
        leaves.dedup_by(|a, b| record_key(a) == record_key(b));

        let what = format!("{} {}", owner.kind, display_name(&owner.metadata));
        let mut evidence: Vec<String> = self.deletion_line(&owner.metadata).into_iter().collect();
        evidence.push(format!("finalizers [{}]", owner.finalizers().join(", ")));
        evidence.push(format!(
            "{FOREGROUND}: the garbage collector removes it once every dependent with blockOwnerDeletion is gone; {} still terminating",
            direct.len()
        ));
        for d in direct.iter().take(MAX_LISTED) {
            evidence.push(format!(
                "dependent {} {} (blockOwnerDeletion) is terminating with finalizers [{}]",
                d.kind,
                display_name(&d.metadata),
                d.finalizers().join(", ")
            ));
        }
        for l in leaves.iter().take(MAX_LISTED) {
            evidence.push(format!(
                "blocked leaf: {} {} held by [{}]",
                l.kind,
                display_name(&l.metadata),
                l.finalizers().join(", ")
            ));
        }
        let leaf_keys: BTreeSet<&str> = leaves
            .iter()
            .flat_map(|l| l.finalizers())
            .map(String::as_str)
            .collect();
        Some(Finding {
            subject: record_ref(owner),
            summary: format!(
                "{what} has been terminating for {} in foreground deletion, waiting on {} dependent(s); the chain ends at {} object(s) held by [{}]",
                fmt_secs(age.as_secs()),
                direct.len(),
                leaves.len(),
                leaf_keys.into_iter().collect::<Vec<_>>().join(", ")
            ),
            evidence,
            detail: FindingDetail::WaitingOnDependents {
                dependents: direct.iter().map(|d| record_ref(d)).collect(),
                leaves: leaves.iter().map(|l| record_ref(l)).collect(),
            },
        })
    }

    /// Judges every finalizer key of `record` and emits, as applicable, one
    /// `orphan` finding (the dead keys), one WaitingOnLiveController
    /// (the alive keys), one UnknownFinalizerOwner (the undetermined keys)
    /// and one ProtectedFinalizerInUse per protection key in use.
    pub(super) fn finalizer_findings(
        &self,
        record: &ObjectRecord,
        age: SignedDuration,
        orphan_kind: fn(FinalizerRemoval) -> FindingDetail,
        skip: &[&str],
        findings: &mut Vec<Finding>,
    ) {
        let subject = record_ref(record);
        let finalizers = record.finalizers().to_vec();
        let common = self.finalizer_common(record, &finalizers);
        let (verdicts, protected) = self.judge_finalizers(record, &finalizers, skip);
        let dead: Vec<&FinalizerVerdict> =
            verdicts.iter().filter(|v| v.verdict.is_dead()).collect();
        let alive: Vec<&FinalizerVerdict> =
            verdicts.iter().filter(|v| v.verdict.is_alive()).collect();
        let unknown: Vec<&FinalizerVerdict> = verdicts
            .iter()
            .filter(|v| matches!(v.verdict, OwnerVerdict::Unknown { .. }))
            .collect();
        let what = format!("{} {}", record.kind, display_name(&record.metadata));

        if !dead.is_empty() {
            let orphan: Vec<String> = dead.iter().map(|v| v.finalizer.clone()).collect();
            let kept: Vec<String> = finalizers
                .iter()
                .filter(|k| !orphan.contains(k))
                .cloned()
                .collect();
            let mut evidence = common.clone();
            evidence.extend(verdict_lines(&dead));
            evidence.extend(verdict_lines(&alive));
            evidence.extend(verdict_lines(&unknown));
            let removal = FinalizerRemoval {
                resource: record.resource.clone(),
                resource_version: record.metadata.resource_version.clone(),
                age_seconds: age.as_secs(),
                finalizers: finalizers.clone(),
                orphan: orphan.clone(),
                kept: kept.clone(),
                verdicts: verdicts.clone(),
            };
            findings.push(Finding {
                subject: subject.clone(),
                summary: format!(
                    "{what} has been terminating for {} held by finalizer(s) [{}] with no live owner{}",
                    fmt_secs(age.as_secs()),
                    orphan.join(", "),
                    if kept.is_empty() {
                        String::new()
                    } else {
                        format!("; [{}] stay", kept.join(", "))
                    }
                ),
                evidence,
                detail: orphan_kind(removal),
            });
        }
        let live: fn(FinalizerFacts) -> FindingDetail = FindingDetail::WaitingOnLiveController;
        let unjudged: fn(FinalizerFacts) -> FindingDetail = FindingDetail::UnknownFinalizerOwner;
        for (detail, group, label) in [
            (live, &alive, "a live controller"),
            (
                unjudged,
                &unknown,
                "an owner that could not be argued alive or dead",
            ),
        ] {
            if group.is_empty() {
                continue;
            }
            let keys: Vec<&str> = group.iter().map(|v| v.finalizer.as_str()).collect();
            let mut evidence = common.clone();
            evidence.extend(verdict_lines(group));
            findings.push(Finding {
                subject: subject.clone(),
                summary: format!(
                    "{what} has been terminating for {} waiting on finalizer(s) [{}] of {label}",
                    fmt_secs(age.as_secs()),
                    keys.join(", ")
                ),
                evidence,
                detail: detail(FinalizerFacts {
                    resource: record.resource.clone(),
                    age_seconds: age.as_secs(),
                    verdicts: group.iter().map(|v| (*v).clone()).collect(),
                }),
            });
        }
        protected_findings(&subject, &what, &common, protected, findings);
    }

    /// The evidence every finding about `record`'s finalizers starts with.
    fn finalizer_common(&self, record: &ObjectRecord, finalizers: &[String]) -> Vec<String> {
        let mut common: Vec<String> = self.deletion_line(&record.metadata).into_iter().collect();
        if record.api_version == "v1"
            && record.kind == "Pod"
            && record.metadata.deletion_grace_period_seconds == Some(0)
        {
            // BeforeDelete never lets a shortened grace period put the
            // timestamp in the past: the final delete stamps its own time.
            common.push(
                "deletionGracePeriodSeconds 0: the kubelet has finished with it, and the API server set deletionTimestamp to the time of the kubelet's final delete, so it was deleted earlier than that".into(),
            );
        }
        common.push(format!("finalizers [{}]", finalizers.join(", ")));
        common.extend(finalizer_managers(&record.metadata));
        if let Some(ns) = record.namespace()
            && self
                .snapshot
                .namespace(ns)
                .is_some_and(|n| n.metadata.deletion_timestamp.is_some())
        {
            common.push(format!(
                "it lives in Terminating namespace {ns}, whose deletion waits for it"
            ));
        }
        common
    }

    /// Each key of `finalizers` not in `skip`: a protection key in use
    /// (with its users), or the verdict on its owner.
    fn judge_finalizers(
        &self,
        record: &ObjectRecord,
        finalizers: &[String],
        skip: &[&str],
    ) -> (Vec<FinalizerVerdict>, Vec<(String, Vec<String>)>) {
        let mut verdicts = Vec::new();
        let mut protected = Vec::new();
        for key in finalizers.iter().filter(|k| !skip.contains(&k.as_str())) {
            if let Some(users) = protection_in_use(
                key,
                &record.kind,
                record.namespace(),
                record.name(),
                self.snapshot,
            ) {
                protected.push((key.clone(), users));
                continue;
            }
            verdicts.push(self.owners.verdict(&OwnerQuery {
                finalizer: key,
                kind: &record.kind,
                record: Some(record),
                assume_dead: self.assume_dead,
            }));
        }
        (verdicts, protected)
    }
}

/// Which field managers last wrote `metadata.finalizers` (from
/// managedFields, when the collector kept them): a hint at who added a key.
fn finalizer_managers(meta: &ObjectMeta) -> Vec<String> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .and_then(|f| f.0.get("f:metadata"))
                .and_then(|m| m.get("f:finalizers"))
                .is_some()
        })
        .map(|m| {
            format!(
                "managedFields: manager {} ({}) owns metadata.finalizers{}",
                quoted(m.manager.as_deref().unwrap_or_default()),
                m.operation.as_deref().unwrap_or_default(),
                m.time
                    .as_ref()
                    .map(|t| format!(", last written {}", t.0))
                    .unwrap_or_default()
            )
        })
        .collect()
}

/// One line per verdict: the key, its owner's label and the evidence.
fn verdict_lines(vs: &[&FinalizerVerdict]) -> Vec<String> {
    vs.iter()
        .map(|v| {
            format!(
                "{}: owner {}: {}",
                v.finalizer,
                v.verdict.label(),
                v.verdict.evidence().join("; ")
            )
        })
        .collect()
}

/// One ProtectedFinalizerInUse per protection key in use: normal, never
/// stripped.
fn protected_findings(
    subject: &ObjectRef,
    what: &str,
    common: &[String],
    protected: Vec<(String, Vec<String>)>,
    findings: &mut Vec<Finding>,
) {
    for (key, users) in protected {
        let mut evidence = common.to_vec();
        evidence.extend(users.iter().map(|u| format!("in use: {u}")));
        findings.push(Finding {
            subject: subject.clone(),
            summary: format!(
                "{what} is held by {key} while it is in use ({}): normal, never stripped",
                users.join("; ")
            ),
            evidence,
            detail: FindingDetail::ProtectedFinalizerInUse {
                finalizer: key,
                used_by: users,
            },
        });
    }
}

//! What is being deleted and is not stuck (yet): a namespace or object
//! deleted less than `--stuck-after` ago, and a pod still inside its
//! grace period. A person who runs the doctor right after a deletion
//! should read "terminating, normal so far", with the moment it would
//! count as stuck, rather than "nothing stuck found" about a namespace
//! they can see Terminating, or a controller blamed for a pod that is
//! only being given the time it asked for.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use super::model::{Finding, ObjectRef, Snapshot};
use super::owner::fmt_secs;
use crate::text::list;

/// One object being deleted that is not judged stuck yet, and why not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NormalSoFar {
    pub subject: ObjectRef,
    /// `deleted 20s ago, under --stuck-after 2m0s`, or the grace period.
    pub why: String,
    /// When it would count as stuck (or its grace period ends).
    pub until: Timestamp,
}

impl NormalSoFar {
    /// `namespace app: terminating, normal so far: ... (until T)`.
    pub fn line(&self) -> String {
        let s = &self.subject;
        let what = match &s.namespace {
            _ if s.kind == "Namespace" => format!("namespace {}", s.name),
            Some(ns) => format!("{} {ns}/{}", s.kind, s.name),
            None => format!("{} {}", s.kind, s.name),
        };
        format!(
            "{what}: terminating, normal so far: {} (until {})",
            self.why, self.until
        )
    }
}

fn secs(d: SignedDuration) -> i64 {
    d.as_secs()
}

fn object_ref(
    api_version: &str,
    kind: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> ObjectRef {
    ObjectRef {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: meta.namespace.clone(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone(),
    }
}

/// A pod's grace period end, when the snapshot was taken inside it (a
/// pod's deletionTimestamp is that end, not the moment of the request).
fn grace_end(snapshot: &Snapshot, pod: &k8s_openapi::api::core::v1::Pod) -> Option<Timestamp> {
    let end = pod.metadata.deletion_timestamp.as_ref()?.0;
    (snapshot.taken_at < end).then_some(end)
}

/// What is still in namespace `ns`, one line each (at most
/// [`CONTENT_LINES`], then a count), and, when what holds it is pods
/// inside their grace period, when the last of those periods ends: the
/// namespace controller is then waiting on the kubelet, as it should.
///
/// Since OrderedNamespaceDeletion (GA in v1.34, on by default in v1.33)
/// the controller deletes a namespace's pods first and the rest only once
/// they are gone, so a ConfigMap or ServiceAccount not deleted yet beside
/// a pod in its grace period is waiting on that pod, not stuck. An object
/// already deleted that is not such a pod (a finalizer holding it) is
/// something else, and the namespace is not "normal so far".
pub fn namespace_content(snapshot: &Snapshot, ns: &str) -> (Vec<String>, Option<Timestamp>) {
    let mut lines = Vec::new();
    let mut held_otherwise = false;
    let mut last_end: Option<Timestamp> = None;
    let records: Vec<_> = snapshot
        .namespace_content
        .iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(ns))
        .collect();
    for r in &records {
        let name = r.metadata.name.as_deref().unwrap_or("?");
        let pod = (r.kind == "Pod")
            .then(|| {
                snapshot.pods.iter().find(|p| {
                    p.metadata.namespace.as_deref() == Some(ns)
                        && p.metadata.name.as_deref() == Some(name)
                })
            })
            .flatten();
        let state = match (
            pod.and_then(|p| grace_end(snapshot, p)),
            &r.metadata.deletion_timestamp,
        ) {
            (Some(end), _) => {
                last_end = Some(last_end.map_or(end, |l| l.max(end)));
                format!("terminating inside its grace period, which ends at {end}")
            }
            (None, Some(t)) => {
                held_otherwise = true;
                format!(
                    "terminating since {} ({} before the snapshot){}",
                    t.0,
                    fmt_secs(secs(snapshot.age_of(t.0))),
                    match r.metadata.finalizers.as_deref() {
                        Some(f) if !f.is_empty() => format!(", finalizers {}", list(f)),
                        _ => String::new(),
                    }
                )
            }
            (None, None) if r.kind == "Pod" => {
                held_otherwise = true;
                "not deleted yet".to_owned()
            }
            (None, None) => "not deleted yet (pods go first)".to_owned(),
        };
        if lines.len() < CONTENT_LINES {
            lines.push(format!("{} {ns}/{name}: {state}", r.kind));
        }
    }
    if records.len() > CONTENT_LINES {
        lines.push(format!("... and {} more", records.len() - CONTENT_LINES));
    }
    let in_grace = (!held_otherwise).then_some(last_end).flatten();
    (lines, in_grace)
}

/// How many objects of a namespace's content are named one by one.
pub const CONTENT_LINES: usize = 10;

/// Everything in `snapshot` that is being deleted, is not the subject of
/// a finding, and is within `stuck_after` of its deletion or inside its
/// grace period, measured on the snapshot's clock (the API server's).
pub fn normal_so_far(
    snapshot: &Snapshot,
    stuck_after: Duration,
    findings: &[Finding],
) -> Vec<NormalSoFar> {
    let threshold = SignedDuration::try_from(stuck_after).unwrap_or(SignedDuration::MAX);
    let found = |r: &ObjectRef| {
        findings.iter().any(|f| {
            f.subject.kind == r.kind
                && f.subject.namespace == r.namespace
                && f.subject.name == r.name
        })
    };
    let under_threshold = |deleted: Timestamp| {
        let age = snapshot.age_of(deleted);
        (age <= threshold).then(|| {
            (
                format!(
                    "deleted {} ago, under --stuck-after {}",
                    fmt_secs(secs(age)),
                    fmt_secs(secs(threshold))
                ),
                deleted.checked_add(threshold).unwrap_or(snapshot.taken_at),
            )
        })
    };
    let mut out = Vec::new();
    let mut push = |subject: ObjectRef, why_until: Option<(String, Timestamp)>| {
        if let Some((why, until)) = why_until
            && !found(&subject)
        {
            out.push(NormalSoFar {
                subject,
                why,
                until,
            });
        }
    };
    for ns in &snapshot.namespaces {
        if let Some(t) = &ns.metadata.deletion_timestamp {
            let name = ns.metadata.name.as_deref().unwrap_or_default();
            let why_until = under_threshold(t.0).or_else(|| {
                let (lines, in_grace) = namespace_content(snapshot, name);
                in_grace.map(|end| {
                    (
                        format!(
                            "what is left in it waits on its pods' grace periods ({})",
                            lines.join("; ")
                        ),
                        end,
                    )
                })
            });
            push(object_ref("v1", "Namespace", &ns.metadata), why_until);
        }
    }
    for pod in &snapshot.pods {
        let Some(t) = &pod.metadata.deletion_timestamp else {
            continue;
        };
        // A pod's deletionTimestamp is the end of its grace period, not
        // the moment of the request: the kubelet has until then.
        let subject = object_ref("v1", "Pod", &pod.metadata);
        let why_until = if grace_end(snapshot, pod).is_some() {
            Some((
                format!(
                    "inside its grace period ({} s; {} left)",
                    pod.metadata.deletion_grace_period_seconds.unwrap_or(0),
                    fmt_secs(secs(t.0.duration_since(snapshot.taken_at)))
                ),
                t.0,
            ))
        } else {
            under_threshold(t.0)
        };
        push(subject, why_until);
    }
    for r in &snapshot.terminating {
        if r.kind == "Pod" {
            continue;
        }
        if let Some(t) = &r.metadata.deletion_timestamp {
            push(
                object_ref(&r.api_version, &r.kind, &r.metadata),
                under_threshold(t.0),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot_at(at: &str) -> Snapshot {
        Snapshot {
            taken_at: at.parse().unwrap(),
            ..Default::default()
        }
    }

    /// A pod as a v1.34 API server returns it 20 s into a 150 s grace
    /// period: its deletionTimestamp is the period's end.
    fn pod_in_grace() -> k8s_openapi::api::core::v1::Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "slow-stop", "namespace": "app", "uid": "u1",
                "deletionTimestamp": "2026-11-29T10:02:30Z",
                "deletionGracePeriodSeconds": 150
            },
            "spec": {"terminationGracePeriodSeconds": 150, "containers": []}
        }))
        .unwrap()
    }

    fn terminating_namespace(deleted: &str) -> k8s_openapi::api::core::v1::Namespace {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "app", "uid": "n1", "deletionTimestamp": deleted},
            "status": {"phase": "Terminating"}
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_inside_its_grace_period_is_normal_until_the_period_ends() {
        let mut s = snapshot_at("2026-11-29T10:00:20Z");
        s.pods.push(pod_in_grace());
        let n = normal_so_far(&s, Duration::from_secs(60), &[]);
        assert_eq!(n.len(), 1, "{n:?}");
        assert_eq!(
            n[0].line(),
            "Pod app/slow-stop: terminating, normal so far: inside its grace period (150 s; 2m10s left) (until 2026-11-29T10:02:30Z)"
        );
    }

    #[test]
    fn a_namespace_deleted_under_the_threshold_is_normal_and_one_past_it_is_not() {
        let mut s = snapshot_at("2026-11-29T10:00:20Z");
        s.namespaces
            .push(terminating_namespace("2026-11-29T10:00:00Z"));
        let n = normal_so_far(&s, Duration::from_secs(120), &[]);
        assert_eq!(
            n[0].line(),
            "namespace app: terminating, normal so far: deleted 20s ago, under --stuck-after 2m0s (until 2026-11-29T10:02:00Z)"
        );
        assert!(normal_so_far(&s, Duration::from_secs(10), &[]).is_empty());
    }

    #[test]
    fn a_namespace_whose_last_content_is_a_pod_in_its_grace_period_is_normal() {
        // 83 s after the namespace's deletion, past a 60 s threshold; its
        // last pod asked for 150 s to stop.
        let mut s = snapshot_at("2026-11-29T10:01:23Z");
        s.namespaces
            .push(terminating_namespace("2026-11-29T10:00:00Z"));
        s.pods.push(pod_in_grace());
        s.namespace_content.push(crate::doctor::ObjectRecord {
            api_version: "v1".into(),
            kind: "Pod".into(),
            resource: "pods".into(),
            namespaced: true,
            metadata: pod_in_grace().metadata,
        });
        let n = normal_so_far(&s, Duration::from_secs(60), &[]);
        let ns = n
            .iter()
            .find(|n| n.subject.kind == "Namespace")
            .expect("the namespace is normal so far");
        assert_eq!(ns.until, "2026-11-29T10:02:30Z".parse().unwrap());
        assert!(
            ns.line().contains(
                "Pod app/slow-stop: terminating inside its grace period, which ends at 2026-11-29T10:02:30Z"
            ),
            "{}",
            ns.line()
        );
        // Pods go first (OrderedNamespaceDeletion): a ConfigMap not deleted
        // yet beside the pod waits on it, and keeps the namespace normal.
        s.namespace_content.push(crate::doctor::ObjectRecord {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            resource: "configmaps".into(),
            namespaced: true,
            metadata: serde_json::from_value(
                serde_json::json!({"name": "kube-root-ca.crt", "namespace": "app"}),
            )
            .unwrap(),
        });
        let n = normal_so_far(&s, Duration::from_secs(60), &[]);
        let ns = n
            .iter()
            .find(|n| n.subject.kind == "Namespace")
            .expect("still normal with a ConfigMap waiting on the pod");
        assert!(
            ns.line()
                .contains("ConfigMap app/kube-root-ca.crt: not deleted yet (pods go first)"),
            "{}",
            ns.line()
        );
        // Once the period is over, it is no longer normal.
        s.taken_at = "2026-11-29T10:02:40Z".parse().unwrap();
        let n = normal_so_far(&s, Duration::from_secs(60), &[]);
        assert!(n.iter().all(|n| n.subject.kind != "Namespace"), "{n:?}");
    }

    #[test]
    fn what_a_finding_is_about_is_not_listed_as_normal() {
        let mut s = snapshot_at("2026-11-29T10:00:20Z");
        s.namespaces
            .push(terminating_namespace("2026-11-29T10:00:00Z"));
        let finding = Finding {
            subject: object_ref("v1", "Namespace", &s.namespaces[0].metadata),
            summary: String::new(),
            evidence: Vec::new(),
            detail: crate::doctor::FindingDetail::WaitingOnDependents {
                dependents: Vec::new(),
                leaves: Vec::new(),
            },
        };
        assert!(normal_so_far(&s, Duration::from_secs(120), &[finding]).is_empty());
    }
}

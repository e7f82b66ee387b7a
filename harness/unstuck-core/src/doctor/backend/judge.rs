//! The verdict "gone" (or serving, or unknown) on a backend, from the
//! collector's lookup of its Service.

use super::{BackendState, Judgement, SUSTAINED};
use crate::doctor::model::{EndpointRead, ServiceLookup};

fn quote_read(r: &EndpointRead) -> String {
    format!(
        "{} ready, {} not ready over {} EndpointSlice(s) at {}",
        r.ready, r.not_ready, r.slices, r.at
    )
}

/// Judges the backend from the collector's lookup; `None` (no lookup made)
/// is never proof.
pub fn judge(lookup: Option<&ServiceLookup>) -> Judgement {
    use BackendState::*;
    let Some(l) = lookup else {
        return Judgement::new(
            Unknown,
            vec!["the collector made no lookup of its Service: not proven gone".into()],
        );
    };
    let svc = &l.service;
    if let Some(e) = &l.error {
        return Judgement::new(
            Unknown,
            vec![format!(
                "the collector's lookup of Service {svc} failed ({e}): a failed lookup proves nothing either way"
            )],
        );
    }
    if !l.exists {
        return Judgement::new(
            Gone("ServiceNotFound"),
            vec![format!("Service {svc} does not exist (GET returned 404)")],
        );
    }
    let last = l.reads.last();
    let ready_now = last.map(|r| r.ready).or(l.ready_endpoints);
    if l.service_type.as_deref() == Some("ExternalName") {
        return Judgement::new(
            Unknown,
            vec![format!(
                "Service {svc} is of type ExternalName (-> {}): it points at a DNS name the API does not show, so its backend is not proven gone",
                l.external_name.as_deref().unwrap_or("?")
            )],
        );
    }
    if let Some(n) = ready_now.filter(|n| *n > 0) {
        let seen = last.map(quote_read).unwrap_or_else(|| format!("{n} ready"));
        return Judgement::new(
            Serving,
            vec![format!(
                "Service {svc} has ready endpoints in its EndpointSlices{}: {seen}",
                if l.has_selector == Some(false) {
                    " (no selector: endpoints maintained by hand)"
                } else {
                    ""
                }
            )],
        );
    }
    match l.has_selector {
        Some(true) => {}
        Some(false) => {
            return Judgement::new(
                Unknown,
                vec![format!(
                    "Service {svc} has no selector: its endpoints are maintained by hand or by something outside the cluster's controllers, and none is ready in its EndpointSlices{}; that is not proof its backend is gone",
                    last.map(|r| format!(" ({})", quote_read(r)))
                        .unwrap_or_default()
                )],
            );
        }
        None => {
            return Judgement::new(
                Unknown,
                vec![format!(
                    "Service {svc} exists with no ready endpoint, but the lookup did not record its selector and reads: not proven gone"
                )],
            );
        }
    }
    judge_selected(l, last)
}

/// Why a Service that exists serves nothing, at its root, when the lookup
/// shows it: the first not-Ready pod's causes in the words of the
/// component that knows (scheduler, kubelet), or a selector no pod
/// matches. `None` when it serves, is gone, or nothing was read.
pub fn not_serving_cause(lookup: Option<&ServiceLookup>) -> Option<String> {
    let l = lookup?;
    if !l.exists || l.error.is_some() || l.reads.last().is_some_and(|r| r.ready > 0) {
        return None;
    }
    let pods = l.pods.as_ref()?;
    if pods.is_empty() {
        return l.selector.as_ref().map(|sel| {
            format!(
                "no pod matches its selector {sel} (its workload is missing, scaled to 0, or cannot create pods)"
            )
        });
    }
    pods.iter()
        .find(|p| !p.ready && !p.causes.is_empty())
        .map(|p| format!("pod {}: {}", p.name, p.causes.join("; ")))
}

/// A Service that selects pods and has no ready endpoint now: gone only
/// if none was ready over [`SUSTAINED`] and none of its pods is starting
/// or restarting; every read and the pods are quoted.
fn judge_selected(l: &ServiceLookup, last: Option<&EndpointRead>) -> Judgement {
    use BackendState::*;
    let svc = &l.service;
    let mut evidence: Vec<String> = l
        .reads
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                "read {} of Service {svc}'s endpoints: {}",
                i + 1,
                quote_read(r)
            )
        })
        .collect();
    if let Some(sel) = &l.selector {
        evidence.push(format!("its selector: {sel}"));
    }
    if let Some(r) = l.reads.iter().find(|r| r.ready > 0) {
        evidence.push(format!(
            "it had ready endpoints at {}: the backend is changing, not gone",
            r.at
        ));
        return Judgement::new(Unknown, evidence);
    }
    let span = match (l.reads.first(), last) {
        (Some(a), Some(b)) => b.at.duration_since(a.at),
        _ => Default::default(),
    };
    let sustained = l.reads.len() >= 2 && span.unsigned_abs() >= SUSTAINED;
    let now = last.map(|r| r.at);
    let pods = match (&l.pods, &l.pods_error) {
        (_, Some(e)) => {
            evidence.push(format!(
                "the pods its selector matches could not be read ({e}): whether the backend is restarting is unknown"
            ));
            return Judgement::new(Unknown, evidence);
        }
        (None, None) => {
            evidence.push("the pods its selector matches were not read".into());
            return Judgement::new(Unknown, evidence);
        }
        (Some(p), None) => p,
    };
    let coming: Vec<String> = pods
        .iter()
        .filter_map(|p| p.coming_back(now.unwrap_or_default()))
        .collect();
    if !coming.is_empty() {
        evidence.extend(coming);
        evidence.push("a backend that is starting or restarting is not proven gone".into());
        return Judgement::new(Unknown, evidence);
    }
    if !sustained {
        evidence.push(format!(
            "no ready endpoint, but not shown for {} s (two reads that far apart are needed): not proven gone",
            SUSTAINED.as_secs()
        ));
        return Judgement::new(Unknown, evidence);
    }
    evidence.push(if pods.is_empty() {
        "no pod matches its selector".to_string()
    } else {
        format!(
            "the pods its selector matches are neither starting nor restarting: {}",
            pods.iter()
                .map(|p| format!(
                    "{} ({}{}, {} restart(s){})",
                    p.name,
                    p.phase.as_deref().unwrap_or("Unknown"),
                    if p.deleting { ", deleting" } else { "" },
                    p.restarts,
                    p.causes_text()
                ))
                .collect::<Vec<_>>()
                .join(", ")
        )
    });
    evidence.push(format!(
        "no ready endpoint for {} s: the backend is gone",
        span.as_secs()
    ));
    Judgement::new(Gone("NoReadyEndpoints"), evidence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::model::{BackendPod, ServiceKey};
    use k8s_openapi::{api::core::v1::Pod, jiff::Timestamp};

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn read(at: &str, ready: u32, not_ready: u32) -> EndpointRead {
        EndpointRead {
            at: t(at),
            slices: 1,
            ready,
            not_ready,
        }
    }

    fn base() -> ServiceLookup {
        ServiceLookup {
            service: ServiceKey {
                namespace: "policy-system".into(),
                name: "policy-webhook".into(),
            },
            exists: true,
            ready_endpoints: Some(0),
            error: None,
            service_type: Some("ClusterIP".into()),
            external_name: None,
            has_selector: Some(true),
            selector: Some("app=policy".into()),
            reads: vec![
                read("2026-11-25T10:00:00Z", 0, 0),
                read("2026-11-25T10:00:06Z", 0, 0),
            ],
            pods: Some(vec![]),
            pods_error: None,
        }
    }

    /// A pod as recorded from a v1.34 cluster, crash-looping.
    fn crash_looping() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "policy-7d9f-abcde", "namespace": "policy-system"},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [{
                    "name": "webhook", "image": "policy:1", "imageID": "", "ready": false,
                    "restartCount": 7,
                    "state": {"waiting": {"reason": "CrashLoopBackOff",
                              "message": "back-off 5m0s restarting failed container"}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                  "finishedAt": "2026-11-25T09:58:00Z"}}
                }]
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_missing_service_is_gone_and_a_failed_lookup_proves_nothing() {
        let missing = ServiceLookup {
            exists: false,
            ready_endpoints: None,
            reads: vec![],
            ..base()
        };
        let j = judge(Some(&missing));
        assert_eq!(j.state, BackendState::Gone("ServiceNotFound"));
        assert!(j.evidence[0].contains("returned 404"), "{j:?}");

        for e in [
            "403 Forbidden: services is forbidden",
            "operation timed out",
        ] {
            let failed = ServiceLookup {
                exists: false,
                error: Some(e.into()),
                ..base()
            };
            let j = judge(Some(&failed));
            assert_eq!(j.state, BackendState::Unknown, "{e}");
            assert!(j.evidence[0].contains(e), "{j:?}");
        }
        assert_eq!(judge(None).state, BackendState::Unknown);
    }

    #[test]
    fn external_name_and_selectorless_services_are_never_gone() {
        let external = ServiceLookup {
            service_type: Some("ExternalName".into()),
            external_name: Some("policy.example.net".into()),
            has_selector: Some(false),
            ..base()
        };
        let j = judge(Some(&external));
        assert_eq!(j.state, BackendState::Unknown);
        assert!(j.evidence[0].contains("policy.example.net"), "{j:?}");

        // No selector, a hand-made EndpointSlice with a ready endpoint.
        let manual = ServiceLookup {
            has_selector: Some(false),
            selector: None,
            reads: vec![read("2026-11-25T10:00:00Z", 1, 0)],
            ready_endpoints: Some(1),
            pods: None,
            ..base()
        };
        let j = judge(Some(&manual));
        assert_eq!(j.state, BackendState::Serving);
        assert!(j.evidence[0].contains("no selector"), "{j:?}");

        // No selector and nothing ready, however long: unknown.
        let bare = ServiceLookup {
            has_selector: Some(false),
            selector: None,
            pods: None,
            ..base()
        };
        assert_eq!(judge(Some(&bare)).state, BackendState::Unknown);
    }

    #[test]
    fn no_ready_endpoint_is_gone_only_when_sustained_and_nothing_restarts() {
        let j = judge(Some(&base()));
        assert_eq!(j.state, BackendState::Gone("NoReadyEndpoints"), "{j:?}");
        assert!(
            j.evidence
                .iter()
                .any(|e| e.contains("read 2") && e.contains("10:00:06")),
            "both reads are quoted: {j:?}"
        );
        assert!(
            j.evidence
                .iter()
                .any(|e| e == "no pod matches its selector")
        );

        // One read only, or two too close together: not sustained.
        let once = ServiceLookup {
            reads: vec![read("2026-11-25T10:00:00Z", 0, 0)],
            ..base()
        };
        assert_eq!(judge(Some(&once)).state, BackendState::Unknown);
        let close = ServiceLookup {
            reads: vec![
                read("2026-11-25T10:00:00Z", 0, 0),
                read("2026-11-25T10:00:02Z", 0, 0),
            ],
            ..base()
        };
        assert_eq!(judge(Some(&close)).state, BackendState::Unknown);

        // Ready at the first read, not at the second: changing.
        let flapping = ServiceLookup {
            reads: vec![
                read("2026-11-25T10:00:00Z", 1, 0),
                read("2026-11-25T10:00:06Z", 0, 1),
            ],
            ..base()
        };
        assert_eq!(judge(Some(&flapping)).state, BackendState::Unknown);

        // Ready now: serving, whatever came before.
        let serving = ServiceLookup {
            reads: vec![read("2026-11-25T10:00:00Z", 2, 0)],
            ready_endpoints: Some(2),
            ..base()
        };
        assert_eq!(judge(Some(&serving)).state, BackendState::Serving);
    }

    #[test]
    fn a_restarting_backend_is_not_gone() {
        let looping = ServiceLookup {
            reads: vec![
                read("2026-11-25T10:00:00Z", 0, 1),
                read("2026-11-25T10:00:06Z", 0, 1),
            ],
            pods: Some(vec![BackendPod::from_pod(&crash_looping())]),
            ..base()
        };
        let j = judge(Some(&looping));
        assert_eq!(j.state, BackendState::Unknown, "{j:?}");
        assert!(
            j.evidence
                .iter()
                .any(|e| e.contains("CrashLoopBackOff") && e.contains("7 restart")),
            "{j:?}"
        );
        // The kubelet's own words for why: the wait and the last exit.
        assert!(
            j.evidence.iter().any(|e| e.contains(
                "container webhook waiting (CrashLoopBackOff): back-off 5m0s restarting failed container"
            ) && e.contains(
                "container webhook last terminated (Error, exit code 1, at 2026-11-25T09:58:00Z), 7 restart(s)"
            )),
            "{j:?}"
        );

        // Pending (a rollout's new pod) or just started: coming back.
        let pending = BackendPod {
            name: "p".into(),
            phase: Some("Pending".into()),
            ..Default::default()
        };
        let started = BackendPod {
            name: "s".into(),
            phase: Some("Running".into()),
            last_started: Some(t("2026-11-25T09:59:00Z")),
            ..Default::default()
        };
        for p in [pending, started] {
            let l = ServiceLookup {
                pods: Some(vec![p.clone()]),
                ..base()
            };
            assert_eq!(judge(Some(&l)).state, BackendState::Unknown, "{p:?}");
        }

        // The pods could not be read: unknown.
        let blind = ServiceLookup {
            pods: None,
            pods_error: Some("403 Forbidden".into()),
            ..base()
        };
        assert_eq!(judge(Some(&blind)).state, BackendState::Unknown);
    }

    #[test]
    fn a_pod_long_not_ready_or_going_away_is_not_coming_back() {
        let now = t("2026-11-25T10:00:06Z");
        let stale = BackendPod {
            name: "old".into(),
            phase: Some("Running".into()),
            last_started: Some(t("2026-11-25T08:00:00Z")),
            restarts: 1,
            last_restart: Some(t("2026-11-25T07:59:00Z")),
            ..Default::default()
        };
        assert_eq!(stale.coming_back(now), None);
        let going = BackendPod {
            name: "going".into(),
            phase: Some("Running".into()),
            deleting: true,
            waiting: vec!["ContainerCreating".into()],
            ..Default::default()
        };
        assert_eq!(going.coming_back(now), None);
        let done = BackendPod {
            name: "done".into(),
            phase: Some("Succeeded".into()),
            ..Default::default()
        };
        assert_eq!(done.coming_back(now), None);
        let l = ServiceLookup {
            pods: Some(vec![stale, going, done]),
            ..base()
        };
        let j = judge(Some(&l));
        assert_eq!(j.state, BackendState::Gone("NoReadyEndpoints"), "{j:?}");
        assert!(
            j.evidence
                .iter()
                .any(|e| e.contains("old (Running, 1 restart(s))"))
        );
    }

    #[test]
    fn an_older_recording_without_the_new_fields_still_reads() {
        // tests/recorded/real-v1.34.4/dead-admission-webhook.json's lookup.
        let l: ServiceLookup = serde_json::from_value(serde_json::json!(
            {"service": {"namespace": "policy-system", "name": "policy-webhook"}, "exists": false}
        ))
        .unwrap();
        assert_eq!(judge(Some(&l)).state, BackendState::Gone("ServiceNotFound"));
        // An existing Service with 0 ready and nothing else recorded: unproven.
        let l: ServiceLookup = serde_json::from_value(serde_json::json!(
            {"service": {"namespace": "a", "name": "b"}, "exists": true, "readyEndpoints": 0}
        ))
        .unwrap();
        assert_eq!(judge(Some(&l)).state, BackendState::Unknown);
    }
}

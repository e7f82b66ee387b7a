//! LoadBalancerCleanupPending on snapshots recorded from a real v1.34.4
//! local cluster (2026-12-07, `tests/recorded/real-v1.34.4/`):
//!
//! - `cloud-controller-gone-lb-service.json`: the runner's snapshot of
//!   scenario 54: a Service of type LoadBalancer deleted while holding
//!   `service.kubernetes.io/load-balancer-cleanup`, no cloud controller
//!   manager Lease, no event, kube-controller-manager alive;
//! - `lb-cleanup-cloud-controller-gone.json` (`unstuck doctor
//!   --save-snapshot`): two such Services with addresses in
//!   `status.loadBalancer.ingress` (written through the status
//!   subresource, as the cloud controller manager writes them), and a
//!   `kube-system/cloud-controller-manager` Lease last renewed two hours
//!   before: the manager that ran here stopped;
//! - `lb-cleanup-cloud-controller-failing.json`: the same a minute
//!   earlier, with the service controller's Warning about one Service
//!   (`SyncLoadBalancerFailed`, the cloud's `DependencyViolation`) since
//!   its deletion: a manager that runs and fails.
//!
//! Before this kind the key was judged kube-controller-manager's (alive,
//! so "waiting on a live controller" for ever), though kube-controller-
//! manager has not run the service controller since v1.31.

mod doctor_support;

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::SignedDuration;
use unstuck_core::doctor::{
    Action, BlockerGraph, DiagnoseOptions, Finding, FindingDetail, FindingKind, OwnerVerdict, Plan,
    Snapshot, diagnose,
    graph::{NodeKind, NodeState},
    model::{LOAD_BALANCER_CLEANUP, LoadBalancerCleanup, Unreadable},
    plan, plan_assuming,
};

use doctor_support::recorded;

fn opts() -> DiagnoseOptions {
    DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        ..Default::default()
    }
}

fn lb_finding<'a>(findings: &'a [Finding], name: &str) -> (&'a Finding, &'a LoadBalancerCleanup) {
    let f = findings
        .iter()
        .find(|f| f.kind() == FindingKind::LoadBalancerCleanupPending && f.subject.name == name)
        .unwrap_or_else(|| {
            panic!(
                "no LoadBalancerCleanupPending for {name}; found {:?}",
                findings
                    .iter()
                    .map(|f| format!("{} {}", f.kind(), f.subject.name))
                    .collect::<Vec<_>>()
            )
        });
    let FindingDetail::LoadBalancerCleanupPending(lb) = &f.detail else {
        panic!("{} carries {:?}", f.kind(), f.detail);
    };
    (f, lb)
}

fn verdict(lb: &LoadBalancerCleanup) -> &OwnerVerdict {
    &lb.removal.verdicts[0].verdict
}

/// The steps planned for the finding about Service `name`.
fn steps_for<'p>(p: &'p Plan, findings: &[Finding], name: &str) -> Vec<&'p Action> {
    p.steps
        .iter()
        .filter(|s| findings[s.finding_index].subject.name == name)
        .map(|s| &s.action)
        .collect()
}

fn rationale_for(p: &Plan, findings: &[Finding], name: &str) -> String {
    p.steps
        .iter()
        .filter(|s| findings[s.finding_index].subject.name == name)
        .map(|s| s.rationale.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn without_a_lease_the_owner_is_unknown_and_the_key_stays() {
    let s = recorded("cloud-controller-gone-lb-service.json");
    let findings = diagnose(&s, &opts());
    let (f, lb) = lb_finding(&findings, "storefront");
    assert!(
        matches!(verdict(lb), OwnerVerdict::Unknown { .. }),
        "{:?}",
        verdict(lb)
    );
    let evidence = f.evidence.join("\n");
    for words in [
        "removed only by a cloud controller manager's service controller",
        "kube-controller-manager has not run that controller since v1.31",
        "no kube-system/cloud-controller-manager lease",
        "--assume-dead service.kubernetes.io/load-balancer-cleanup",
    ] {
        assert!(evidence.contains(words), "{words:?} not in {evidence}");
    }
    // The old wrong verdict (kube-controller-manager alive, so a live
    // controller) and a generic orphan are both gone for this key.
    assert!(
        !findings.iter().any(|g| g.subject.name == "storefront"
            && matches!(
                g.kind(),
                FindingKind::WaitingOnLiveController | FindingKind::OrphanFinalizer
            )),
        "{findings:#?}"
    );
    assert!(lb.removal.orphan.is_empty());
    let p = plan(&findings, &s);
    let actions = steps_for(&p, &findings, "storefront");
    assert!(
        matches!(actions[..], [Action::Refuse { .. }]),
        "{actions:?}"
    );
}

#[test]
fn a_person_s_assume_dead_removes_only_that_key() {
    let s = recorded("cloud-controller-gone-lb-service.json");
    let assume = vec![LOAD_BALANCER_CLEANUP.to_owned()];
    let findings = diagnose(
        &s,
        &DiagnoseOptions {
            assume_dead: assume.clone(),
            ..opts()
        },
    );
    let (f, lb) = lb_finding(&findings, "storefront");
    assert!(lb.removal.verdicts[0].assumed_dead);
    assert!(
        f.summary.contains("(assumed: --assume-dead)"),
        "{}",
        f.summary
    );
    let p = plan_assuming(&findings, &s, &assume);
    let actions = steps_for(&p, &findings, "storefront");
    let [Action::RemoveFinalizers(r)] = actions[..] else {
        panic!("{actions:?}");
    };
    assert_eq!(r.remove, vec![LOAD_BALANCER_CLEANUP.to_owned()]);
    assert_eq!(r.target.kind, "Service");
    let why = rationale_for(&p, &findings, "storefront");
    assert!(
        why.contains("leaves any load balancer the cloud made for it (its status names none)"),
        "{why}"
    );
}

#[test]
fn a_stale_lease_and_silence_prove_the_cloud_controller_gone() {
    let s = recorded("lb-cleanup-cloud-controller-gone.json");
    let findings = diagnose(&s, &opts());
    let p = plan(&findings, &s);
    for (name, address) in [
        ("storefront", "a1b2c3d4e5-storefront.elb.example.invalid"),
        ("checkout", "192.0.2.40"),
    ] {
        let (f, lb) = lb_finding(&findings, name);
        let OwnerVerdict::Dead { evidence } = verdict(lb) else {
            panic!("{name}: {:?}", verdict(lb));
        };
        assert!(
            evidence
                .iter()
                .any(|e| e.contains("lease kube-system/cloud-controller-manager is stale")),
            "{evidence:?}"
        );
        assert!(
            evidence
                .iter()
                .any(|e| e.contains("no event from service-controller about it")),
            "{evidence:?}"
        );
        assert_eq!(lb.ingress, vec![address.to_owned()]);
        assert!(f.summary.contains(address), "{}", f.summary);
        let actions = steps_for(&p, &findings, name);
        assert!(
            matches!(actions[..], [Action::RemoveFinalizers(r)] if r.remove == [LOAD_BALANCER_CLEANUP]),
            "{actions:?}"
        );
        let why = rationale_for(&p, &findings, name);
        assert!(
            why.contains(&format!(
                "leaves its load balancer ({address}) in the cloud: delete it there"
            )),
            "{why}"
        );
    }
}

#[test]
fn a_cloud_controller_that_fails_is_alive_and_its_error_is_quoted() {
    let s = recorded("lb-cleanup-cloud-controller-failing.json");
    let findings = diagnose(&s, &opts());
    let p = plan(&findings, &s);

    let (f, lb) = lb_finding(&findings, "checkout");
    assert!(verdict(lb).is_alive(), "{:?}", verdict(lb));
    let failure = lb
        .failure
        .as_ref()
        .expect("the service controller's Warning");
    assert_eq!(failure.reason, "SyncLoadBalancerFailed");
    assert!(failure.message.contains("DependencyViolation"));
    assert_eq!(failure.count, 7);
    assert!(f.summary.contains("fails to delete its load balancer"));
    let actions = steps_for(&p, &findings, "checkout");
    assert!(
        matches!(actions[..], [Action::Refuse { .. }]),
        "{actions:?}"
    );
    let reason = match actions[0] {
        Action::Refuse { reason, .. } => reason.clone(),
        _ => unreachable!(),
    };
    assert!(
        reason.contains("repair that on the cloud's side"),
        "{reason}"
    );
    assert!(reason.contains("DependencyViolation"), "{reason}");

    // The other Service, with no report of its own: the manager runs (it
    // reported about checkout a minute ago), so its key waits.
    let (_, other) = lb_finding(&findings, "storefront");
    let OwnerVerdict::Alive { evidence } = verdict(other) else {
        panic!("{:?}", verdict(other));
    };
    assert!(
        evidence
            .iter()
            .any(|e| e.contains("about Service shop/checkout")
                && e.contains("a cloud controller manager runs")),
        "{evidence:?}"
    );
    assert!(other.failure.is_none());
    let actions = steps_for(&p, &findings, "storefront");
    assert!(matches!(actions[..], [Action::Wait { .. }]), "{actions:?}");
}

/// The gone snapshot with its Lease renewed `ago` before it was taken.
fn with_lease_renewed(ago: SignedDuration) -> Snapshot {
    let mut s = recorded("lb-cleanup-cloud-controller-gone.json");
    let at = s.taken_at.checked_sub(ago).unwrap();
    let lease = s
        .leases
        .iter_mut()
        .find(|l| l.metadata.name.as_deref() == Some("cloud-controller-manager"))
        .expect("the recorded cloud controller manager Lease");
    lease.spec.as_mut().unwrap().renew_time = Some(MicroTime(at));
    s
}

#[test]
fn a_fresh_lease_is_a_live_owner_and_the_key_waits() {
    let s = with_lease_renewed(SignedDuration::from_secs(2));
    let findings = diagnose(&s, &opts());
    let (_, lb) = lb_finding(&findings, "storefront");
    assert!(verdict(lb).is_alive(), "{:?}", verdict(lb));
    let p = plan(&findings, &s);
    assert!(matches!(
        steps_for(&p, &findings, "storefront")[..],
        [Action::Wait { .. }]
    ));
}

#[test]
fn a_lease_stale_for_minutes_may_be_a_restart() {
    let s = with_lease_renewed(SignedDuration::from_secs(300));
    let findings = diagnose(&s, &opts());
    let (_, lb) = lb_finding(&findings, "storefront");
    let OwnerVerdict::Unknown { evidence } = verdict(lb) else {
        panic!("{:?}", verdict(lb));
    };
    assert!(
        evidence.iter().any(|e| e.contains("may be restarting")),
        "{evidence:?}"
    );
}

#[test]
fn events_that_could_not_be_read_are_no_silence() {
    let mut s = recorded("lb-cleanup-cloud-controller-gone.json");
    s.unreadable.push(Unreadable {
        resource: "events".into(),
        message: "events is forbidden: User \"ci\" cannot list resource \"events\"".into(),
    });
    let findings = diagnose(&s, &opts());
    let (_, lb) = lb_finding(&findings, "checkout");
    let OwnerVerdict::Unknown { evidence } = verdict(lb) else {
        panic!("{:?}", verdict(lb));
    };
    assert!(
        evidence
            .iter()
            .any(|e| e.contains("events could not be read")),
        "{evidence:?}"
    );
    let p = plan(&findings, &s);
    assert!(
        !steps_for(&p, &findings, "checkout")
            .iter()
            .any(|a| matches!(a, Action::RemoveFinalizers(_)))
    );
}

/// Leases that could not be read are not "no lease": the verdict says it
/// could not read them, never that it checked none.
#[test]
fn leases_that_could_not_be_read_are_not_counted_as_none() {
    let mut s = recorded("cloud-controller-gone-lb-service.json");
    s.leases.clear();
    s.unreadable.push(Unreadable {
        resource: "leases.coordination.k8s.io".into(),
        message: "leases.coordination.k8s.io is forbidden".into(),
    });
    let findings = diagnose(&s, &opts());
    let lb = findings
        .iter()
        .find_map(|f| match &f.detail {
            FindingDetail::LoadBalancerCleanupPending(lb) => Some(lb),
            _ => None,
        })
        .expect("a held Service");
    let OwnerVerdict::Unknown { evidence } = verdict(lb) else {
        panic!("{:?}", verdict(lb));
    };
    assert!(
        evidence
            .iter()
            .any(|e| e.contains("leases.coordination.k8s.io could not be read")),
        "{evidence:?}"
    );
    assert!(
        evidence.iter().all(|e| !e.contains("leases checked")),
        "{evidence:?}"
    );
}

#[test]
fn the_graph_leads_each_service_to_its_own_cloud_controller_root() {
    let s = recorded("lb-cleanup-cloud-controller-failing.json");
    let findings = diagnose(&s, &opts());
    let p = plan(&findings, &s);
    let g = BlockerGraph::build(&findings, &p, &s);
    let controllers: Vec<_> = g
        .nodes
        .iter()
        .filter(|n| {
            n.kind == NodeKind::Controller
                && n.id.starts_with("controller:cloud-controller-manager@")
        })
        .collect();
    assert_eq!(controllers.len(), 2, "{controllers:#?}");
    let failing = controllers
        .iter()
        .find(|n| n.id.contains("checkout"))
        .expect("checkout's controller");
    assert_eq!(failing.state, NodeState::Failing);
    let root = g
        .roots
        .iter()
        .find(|r| r.id == failing.id)
        .expect("the failing controller is a root");
    let remedy = root.remedy.as_ref().expect("the plan's step for it");
    assert_eq!(remedy.action, "Refuse");
    assert!(!remedy.changes);
    // Service -> key -> controller, for each.
    for n in &controllers {
        assert!(
            g.edges.iter().any(|e| e.to == n.id
                && e.from
                    .starts_with("finalizer:service.kubernetes.io/load-balancer-cleanup@")),
            "{:#?}",
            g.edges
        );
    }
}

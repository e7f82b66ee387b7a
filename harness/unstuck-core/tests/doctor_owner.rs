//! Liveness evidence beyond Leases, replayed on snapshots recorded from a
//! real Kubernetes v1.34.4 local cluster while scenarios 13
//! (`live-controller-without-lease`: a Ready Deployment named for the
//! product, writes to the object, no Lease) and 14
//! (`restarting-controller-finalizer`: a controller crash-looping for over
//! two minutes, no Lease) were in place, and 04 (a fresh Lease). Variants
//! take real objects away ("the product is uninstalled") or mark a list
//! unreadable, never invent evidence.

mod doctor_support;

use std::time::Duration;

use k8s_openapi::jiff::SignedDuration;
use unstuck_core::doctor::{
    Action, DiagnoseOptions, Finding, FindingDetail, FindingKind, OwnerVerdict, Plan, Snapshot,
    diagnose,
    owner::{OwnerQuery, owner_verdict},
    plan,
    snapshot::{ObjectRecord, Unreadable},
};

const BEACON: &str = "beacon.example.org/drain";
const FERRY: &str = "ferry.example.org/flush";

use doctor_support::recorded;

fn object<'a>(s: &'a Snapshot, name: &str) -> &'a ObjectRecord {
    s.terminating
        .iter()
        .find(|r| r.name() == name)
        .unwrap_or_else(|| panic!("{name} is not terminating in the recording"))
}

fn verdict(s: &Snapshot, name: &str, key: &str, assume_dead: &[String]) -> (OwnerVerdict, bool) {
    let r = object(s, name);
    let v = owner_verdict(
        &OwnerQuery {
            finalizer: key,
            kind: &r.kind,
            record: Some(r),
            assume_dead,
        },
        s,
    );
    (v.verdict, v.assumed_dead)
}

fn opts(assume_dead: &[&str]) -> DiagnoseOptions {
    DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        assume_dead: assume_dead.iter().map(|k| k.to_string()).collect(),
        ..Default::default()
    }
}

fn kinds_for(findings: &[Finding], name: &str) -> Vec<FindingKind> {
    findings
        .iter()
        .filter(|f| f.subject.name == name)
        .map(|f| f.kind())
        .collect()
}

fn removals_from(p: &Plan, name: &str) -> Vec<String> {
    p.steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::RemoveFinalizers(r) if r.target.name == name => Some(r.remove.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

fn has(evidence: &[String], parts: &[&str]) -> bool {
    evidence.iter().any(|e| parts.iter().all(|p| e.contains(p)))
}

/// Scenario 13's cluster with the beacon product uninstalled: its
/// Deployment and pods gone, and no write by it on the object.
fn beacon_uninstalled() -> Snapshot {
    let mut s = recorded("live-controller-without-lease");
    let named = |n: Option<&String>| n.is_some_and(|n| n.contains("beacon"));
    s.deployments.retain(|d| !named(d.metadata.name.as_ref()));
    s.pods.retain(|p| !named(p.metadata.name.as_ref()));
    for r in &mut s.terminating {
        if let Some(mf) = &mut r.metadata.managed_fields {
            mf.retain(|m| !named(m.manager.as_ref()));
        }
    }
    s
}

#[test]
fn a_live_controller_without_a_lease_is_alive_by_its_workload_and_writes() {
    let s = recorded("live-controller-without-lease");
    assert!(
        !s.leases.iter().any(|l| l
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
            .contains("beacon")),
        "the recording holds no Lease for the product"
    );
    let (v, assumed) = verdict(&s, "slow-drain", BEACON, &[]);
    assert!(!assumed);
    let OwnerVerdict::Alive { evidence } = &v else {
        panic!("{v:?}")
    };
    assert!(
        has(evidence, &["Deployment", "/beacon-controller", "1/1 ready"]),
        "{evidence:#?}"
    );
    assert!(
        has(
            evidence,
            &["manager \"beacon-controller\"", "wrote to the object"]
        ),
        "{evidence:#?}"
    );

    let findings = diagnose(&s, &opts(&[]));
    assert_eq!(
        kinds_for(&findings, "slow-drain"),
        vec![FindingKind::WaitingOnLiveController]
    );
    // The finding quotes the verdict's evidence.
    let f = findings
        .iter()
        .find(|f| f.subject.name == "slow-drain")
        .unwrap();
    assert!(has(
        &f.evidence,
        &[BEACON, "owner Alive", "beacon-controller"]
    ));
    assert!(removals_from(&plan(&findings, &s), "slow-drain").is_empty());
}

#[test]
fn writes_to_the_object_alone_show_the_owner_alive() {
    let mut s = recorded("live-controller-without-lease");
    s.deployments.clear();
    s.pods.clear();
    let (v, _) = verdict(&s, "slow-drain", BEACON, &[]);
    let OwnerVerdict::Alive { evidence } = &v else {
        panic!("{v:?}")
    };
    assert!(
        has(
            evidence,
            &["manager \"beacon-controller\"", "(word beacon)"]
        ),
        "{evidence:#?}"
    );
    // Two hours later that write is old news, and nothing else is left.
    s.taken_at += SignedDuration::from_hours(2);
    assert!(verdict(&s, "slow-drain", BEACON, &[]).0.is_dead());
}

#[test]
fn dead_needs_every_source_and_lists_each_check() {
    let s = beacon_uninstalled();
    let (v, _) = verdict(&s, "slow-drain", BEACON, &[]);
    let OwnerVerdict::Dead { evidence } = &v else {
        panic!("{v:?}")
    };
    for source in [
        "leases: no fresh lease names beacon.example.org or example.org",
        "workloads: no Deployment, StatefulSet or DaemonSet names",
        "pods: none running or starting names",
        "webhooks and APIServices: none names",
        "writes: no manager other than a person's client or Kubernetes' own wrote",
        "rbac: ",
        "events about the object: none in the last 10 minutes",
        "events: none in the last 10 minutes",
    ] {
        assert!(
            evidence.iter().any(|e| e.starts_with(source)),
            "missing {source:?} in {evidence:#?}"
        );
    }
    let findings = diagnose(&s, &opts(&[]));
    assert_eq!(
        kinds_for(&findings, "slow-drain"),
        vec![FindingKind::OrphanFinalizer]
    );
    assert_eq!(
        removals_from(&plan(&findings, &s), "slow-drain"),
        vec![BEACON.to_owned()]
    );
}

#[test]
fn an_unreadable_source_makes_the_owner_unknown() {
    let mut s = beacon_uninstalled();
    s.unreadable.push(Unreadable {
        resource: "deployments.apps".into(),
        message: "deployments.apps is forbidden: User \"limited\" cannot list resource \"deployments\" in API group \"apps\" at the cluster scope".into(),
    });
    let (v, _) = verdict(&s, "slow-drain", BEACON, &[]);
    let OwnerVerdict::Unknown { evidence } = &v else {
        panic!("{v:?}")
    };
    assert!(
        has(
            evidence,
            &["deployments.apps could not be read", "forbidden"]
        ),
        "{evidence:#?}"
    );
    let findings = diagnose(&s, &opts(&[]));
    assert_eq!(
        kinds_for(&findings, "slow-drain"),
        vec![FindingKind::UnknownFinalizerOwner]
    );
    assert!(removals_from(&plan(&findings, &s), "slow-drain").is_empty());

    // A lease list that failed discovery is as blind.
    let mut s = beacon_uninstalled();
    s.discovery_failures
        .push(unstuck_core::doctor::DiscoveryFailure {
            group_version: "coordination.k8s.io/v1".into(),
            message: "the server is currently unable to handle the request".into(),
        });
    assert!(matches!(
        verdict(&s, "slow-drain", BEACON, &[]).0,
        OwnerVerdict::Unknown { .. }
    ));
}

#[test]
fn a_controller_restarting_for_two_minutes_is_unknown() {
    let s = recorded("restarting-controller-finalizer");
    let (v, _) = verdict(&s, "pending-flush", FERRY, &[]);
    let OwnerVerdict::Unknown { evidence } = &v else {
        panic!("{v:?}")
    };
    assert!(
        has(
            evidence,
            &[
                "Deployment",
                "/ferry-operator",
                "0/1 ready",
                "installed but not shown running"
            ]
        ),
        "{evidence:#?}"
    );
    assert!(
        has(evidence, &["pod ", "ferry-operator", "restarts"]),
        "{evidence:#?}"
    );
    let findings = diagnose(&s, &opts(&[]));
    assert_eq!(
        kinds_for(&findings, "pending-flush"),
        vec![FindingKind::UnknownFinalizerOwner]
    );
    assert!(removals_from(&plan(&findings, &s), "pending-flush").is_empty());
}

#[test]
fn a_lease_stale_for_less_than_ten_minutes_is_unknown() {
    // Scenario 04: the harness controller's fresh Lease live.unstuck.dev.
    let mut s = recorded("live-controller-finalizer");
    let key = "live.unstuck.dev/cleanup";
    assert!(verdict(&s, "slow-cleanup", key, &[]).0.is_alive());
    // Five minutes on, the controller has stopped renewing it.
    s.taken_at += SignedDuration::from_mins(5);
    let (v, _) = verdict(&s, "slow-cleanup", key, &[]);
    let OwnerVerdict::Unknown { evidence } = &v else {
        panic!("{v:?}")
    };
    assert!(
        has(
            evidence,
            &["stale lease", "live.unstuck.dev", "less than 10 minutes"]
        ),
        "{evidence:#?}"
    );
    // Fifteen minutes on, the stale lease no longer keeps it.
    s.taken_at += SignedDuration::from_mins(10);
    let (v, _) = verdict(&s, "slow-cleanup", key, &[]);
    let OwnerVerdict::Dead { evidence } = &v else {
        panic!("{v:?}")
    };
    assert!(
        has(evidence, &["leases:", "stale lease", "live.unstuck.dev"]),
        "{evidence:#?}"
    );
}

#[test]
fn assume_dead_turns_only_that_keys_unknown_into_dead() {
    let s = recorded("restarting-controller-finalizer");
    // Another key named: no effect.
    let other = vec!["other.example.org/x".to_owned()];
    assert!(matches!(
        verdict(&s, "pending-flush", FERRY, &other).0,
        OwnerVerdict::Unknown { .. }
    ));
    let (v, assumed) = verdict(&s, "pending-flush", FERRY, &[FERRY.to_owned()]);
    assert!(assumed);
    let OwnerVerdict::Dead { evidence } = &v else {
        panic!("{v:?}")
    };
    assert!(evidence[0].starts_with("assumed dead: --assume-dead ferry.example.org/flush"));
    assert!(
        has(evidence, &["ferry-operator"]),
        "the Unknown evidence stays quoted"
    );

    let findings = diagnose(&s, &opts(&[FERRY]));
    assert_eq!(
        kinds_for(&findings, "pending-flush"),
        vec![FindingKind::OrphanFinalizer]
    );
    let f = findings
        .iter()
        .find(|f| f.subject.name == "pending-flush")
        .unwrap();
    let FindingDetail::OrphanFinalizer(rem) = &f.detail else {
        panic!("{:?}", f.detail)
    };
    assert!(rem.verdicts.iter().all(|v| v.assumed_dead));
    let p = plan(&findings, &s);
    assert_eq!(removals_from(&p, "pending-flush"), vec![FERRY.to_owned()]);

    // The plan re-argues: once the controller is shown running, the
    // assumption no longer strips anything.
    let mut revived = s.clone();
    for d in &mut revived.deployments {
        if d.metadata.name.as_deref() == Some("ferry-operator") {
            d.status.as_mut().unwrap().ready_replicas = Some(1);
        }
    }
    assert!(removals_from(&plan(&findings, &revived), "pending-flush").is_empty());
}

#[test]
fn assume_dead_never_overrides_a_live_owner() {
    let s = recorded("live-controller-without-lease");
    let (v, assumed) = verdict(&s, "slow-drain", BEACON, &[BEACON.to_owned()]);
    assert!(v.is_alive() && !assumed, "{v:?}");
    let findings = diagnose(&s, &opts(&[BEACON]));
    assert_eq!(
        kinds_for(&findings, "slow-drain"),
        vec![FindingKind::WaitingOnLiveController]
    );
    assert!(removals_from(&plan(&findings, &s), "slow-drain").is_empty());
}

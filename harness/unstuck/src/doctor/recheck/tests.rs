use unstuck_core::doctor::{
    Action, FindingDetail, FindingKind, ObjectRef, ObjectTarget, RemoveFinalizers,
};

use super::*;

const KEY: &str = "pods.guard.example.com/protect";
const OTHER: &str = "acme.example.com/cleanup";

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn strip(index: usize, uid: &str, rv: &str, current: &[&str], remove: &[&str]) -> PlannedStep {
    PlannedStep {
        finding_index: index,
        action: Action::RemoveFinalizers(RemoveFinalizers {
            target: ObjectTarget {
                api_version: "v1".into(),
                kind: "Pod".into(),
                resource: "pods".into(),
                namespace: Some("app".into()),
                name: "web-1".into(),
                uid: uid.into(),
                resource_version: Some(rv.into()),
            },
            current: s(current),
            remove: s(remove),
        }),
        rationale: format!("remove only [{}]", remove.join(", ")),
        force_level: 1,
    }
}

fn observe(index: usize, action: Action, why: &str) -> PlannedStep {
    PlannedStep {
        finding_index: index,
        action,
        rationale: why.into(),
        force_level: 0,
    }
}

fn finding(kind: FindingKind, name: &str, uid: &str) -> Finding {
    Finding {
        subject: ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some("app".into()),
            name: name.into(),
            uid: Some(uid.into()),
        },
        summary: String::new(),
        evidence: Vec::new(),
        detail: match kind {
            FindingKind::OrphanFinalizer => FindingDetail::OrphanFinalizer(Default::default()),
            FindingKind::WaitingOnLiveController => {
                FindingDetail::WaitingOnLiveController(Default::default())
            }
            other => panic!("no test detail for {other}"),
        },
    }
}

fn plan_of(steps: Vec<PlannedStep>) -> Plan {
    Plan {
        steps,
        ..Default::default()
    }
}

fn target(step: &PlannedStep) -> &RemoveFinalizers {
    match &step.action {
        Action::RemoveFinalizers(r) => r,
        other => panic!("not a removal: {other:?}"),
    }
}

#[test]
fn a_step_still_planned_is_written_as_the_fresh_read_has_it() {
    let shown = strip(0, "u1", "100", &[KEY], &[KEY]);
    let fresh_step = strip(3, "u1", "117", &[KEY], &[KEY]);
    let findings = vec![finding(FindingKind::OrphanFinalizer, "web-1", "u1"); 4];
    match recheck(&shown, &findings, &plan_of(vec![fresh_step.clone()])) {
        Recheck::Apply { step, dropped } => {
            // The write tests the resourceVersion of the fresh read.
            assert_eq!(*step, fresh_step);
            assert_eq!(
                target(&step).target.resource_version.as_deref(),
                Some("117")
            );
            assert_eq!(dropped, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_owner_alive_on_re_check_is_not_written() {
    let shown = strip(0, "u1", "100", &[KEY], &[KEY]);
    let why = "no finalizer of v1/Pod app/web-1 can be removed on re-check: pods.guard.example.com/protect: owner Alive on re-check (Lease guard-leader renewed 3s ago), kept";
    let fresh = plan_of(vec![observe(
        0,
        Action::Refuse {
            reason: why.into(),
            kind: Default::default(),
        },
        why,
    )]);
    let findings = vec![finding(FindingKind::OrphanFinalizer, "web-1", "u1")];
    assert_eq!(
        recheck(&shown, &findings, &fresh),
        Recheck::Skip(format!("no longer planned on re-check: {why}"))
    );
    // A live controller is a Wait, with its evidence.
    let wait = plan_of(vec![observe(
        0,
        Action::Wait {
            reason: "alive".into(),
        },
        "a live controller will remove its finalizer (Deployment guard Ready 1/1)",
    )]);
    let findings = vec![finding(FindingKind::WaitingOnLiveController, "web-1", "u1")];
    let Recheck::Skip(why) = recheck(&shown, &findings, &wait) else {
        panic!("written although its owner is alive")
    };
    assert!(why.contains("Deployment guard Ready 1/1"), "{why}");
}

#[test]
fn only_keys_still_dead_and_shown_are_written() {
    let shown = strip(0, "u1", "100", &[KEY, OTHER], &[KEY, OTHER]);
    let findings = vec![finding(FindingKind::OrphanFinalizer, "web-1", "u1")];
    // OTHER's owner came back: the fresh plan removes KEY only.
    let fresh = plan_of(vec![strip(0, "u1", "101", &[KEY, OTHER], &[KEY])]);
    match recheck(&shown, &findings, &fresh) {
        Recheck::Apply { step, dropped } => {
            assert_eq!(target(&step).remove, s(&[KEY]));
            let dropped = dropped.expect("the dropped key is said");
            assert!(dropped.starts_with(&format!("[{OTHER}] no longer planned")));
        }
        other => panic!("{other:?}"),
    }
    // A key the fresh plan would also remove but nobody was shown: not written.
    let shown = strip(0, "u1", "100", &[KEY, OTHER], &[KEY]);
    let fresh = plan_of(vec![strip(0, "u1", "101", &[KEY, OTHER], &[KEY, OTHER])]);
    match recheck(&shown, &findings, &fresh) {
        Recheck::Apply { step, dropped } => {
            assert_eq!(target(&step).remove, s(&[KEY]));
            assert_eq!(target(&step).kept(), s(&[OTHER]));
            assert_eq!(dropped, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn no_shown_key_left_is_a_skip() {
    let shown = strip(0, "u1", "100", &[OTHER], &[OTHER]);
    let fresh = plan_of(vec![strip(0, "u1", "101", &[KEY, OTHER], &[KEY])]);
    let findings = vec![finding(FindingKind::OrphanFinalizer, "web-1", "u1")];
    let Recheck::Skip(why) = recheck(&shown, &findings, &fresh) else {
        panic!("wrote a key that was not shown")
    };
    assert!(
        why.starts_with(&format!("[{OTHER}] no longer planned")),
        "{why}"
    );
}

#[test]
fn a_re_created_object_is_not_touched() {
    let shown = strip(0, "u1", "100", &[KEY], &[KEY]);
    let fresh = plan_of(vec![strip(0, "u9", "5", &[KEY], &[KEY])]);
    let findings = vec![finding(FindingKind::OrphanFinalizer, "web-1", "u9")];
    let Recheck::Skip(why) = recheck(&shown, &findings, &fresh) else {
        panic!("wrote to another incarnation")
    };
    assert!(why.contains("uid u9") && why.contains("uid u1"), "{why}");
}

#[test]
fn an_object_gone_or_released_is_a_skip() {
    let shown = strip(0, "u1", "100", &[KEY], &[KEY]);
    let Recheck::Skip(why) = recheck(&shown, &[], &Plan::default()) else {
        panic!()
    };
    assert!(why.contains("no longer found stuck"), "{why}");
    // A step about another object is not this one's reason.
    let fresh = plan_of(vec![observe(
        0,
        Action::Refuse {
            reason: "x".into(),
            kind: Default::default(),
        },
        "about web-2",
    )]);
    let findings = vec![finding(FindingKind::OrphanFinalizer, "web-2", "u2")];
    let Recheck::Skip(why) = recheck(&shown, &findings, &fresh) else {
        panic!()
    };
    assert!(!why.contains("web-2"), "{why}");
}

#[test]
fn removing_finalizers_is_argued_without_the_age_rule_other_steps_with_it() {
    // The kubelet's final delete moved the pod's deletionTimestamp: judged
    // with the age rule it is not stuck any more, judged without it the
    // same step still holds.
    let shown = strip(0, "u1", "100", &[KEY], &[KEY]);
    let fresh = Fresh {
        findings: Vec::new(),
        plan: Plan::default(),
        unaged: Some((
            vec![finding(FindingKind::OrphanFinalizer, "web-1", "u1")],
            plan_of(vec![strip(0, "u1", "131", &[KEY], &[KEY])]),
        )),
    };
    let (findings, plan) = fresh.view_for(&shown);
    assert!(
        matches!(recheck(&shown, findings, plan), Recheck::Apply { .. }),
        "{plan:?}"
    );
    let delete = PlannedStep {
        finding_index: 0,
        action: Action::DeleteApiService(unstuck_core::doctor::DeleteApiService {
            name: "v1beta1.metrics.k8s.io".into(),
            uid: "a1".into(),
            resource_version: "9".into(),
            reason: "ServiceNotFound".into(),
        }),
        rationale: String::new(),
        force_level: 2,
    };
    let (_, plan) = fresh.view_for(&delete);
    assert!(plan.steps.is_empty(), "an APIService keeps its age rule");
}

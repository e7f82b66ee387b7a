use unstuck_core::doctor::{
    DeleteApiService, FinalizeNamespace, ObjectTarget, RemoveFinalizers, plan::FORCE_OBSERVE,
};

use super::*;

const KEY: &str = "pods.guard.example.com/protect";
const OTHER: &str = "acme.example.com/cleanup";

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn strip(name: &str, uid: &str, current: &[&str], remove: &[&str]) -> PlannedStep {
    PlannedStep {
        finding_index: 0,
        action: Action::RemoveFinalizers(RemoveFinalizers {
            target: ObjectTarget {
                api_version: "v1".into(),
                kind: "Pod".into(),
                resource: "pods".into(),
                namespace: Some("app".into()),
                name: name.into(),
                uid: uid.into(),
                resource_version: Some("100".into()),
            },
            current: s(current),
            remove: s(remove),
        }),
        rationale: "no live owner".into(),
        force_level: 1,
    }
}

fn finalize(name: &str, uid: &str, tokens: &[&str]) -> PlannedStep {
    PlannedStep {
        finding_index: 0,
        action: Action::FinalizeNamespace(FinalizeNamespace {
            name: name.into(),
            uid: uid.into(),
            resource_version: Some("7".into()),
            current: s(tokens),
            remove_tokens: s(tokens),
        }),
        rationale: "provably empty".into(),
        force_level: 3,
    }
}

fn delete_api(name: &str, uid: &str) -> PlannedStep {
    PlannedStep {
        finding_index: 0,
        action: Action::DeleteApiService(DeleteApiService {
            name: name.into(),
            uid: uid.into(),
            resource_version: "9".into(),
            reason: "ServiceNotFound".into(),
        }),
        rationale: "backend gone".into(),
        force_level: 2,
    }
}

fn refuse(reason: &str) -> PlannedStep {
    PlannedStep {
        finding_index: 0,
        action: Action::Refuse {
            reason: reason.into(),
            kind: Default::default(),
        },
        rationale: reason.into(),
        force_level: FORCE_OBSERVE,
    }
}

/// A fixed instant, plus `secs`.
fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).expect("a valid instant")
}

fn consent_to(shown: &[PlannedStep]) -> Consent {
    Consent::confirmed(shown, at(0), at(30)).expect("confirmed in time")
}

/// Answers from a script, and keeps what it was asked.
struct Scripted {
    answers: Vec<Answer>,
    asked: Vec<Vec<PlannedStep>>,
}

impl Scripted {
    fn new(answers: Vec<Answer>) -> Self {
        Self {
            answers,
            asked: Vec::new(),
        }
    }
}

impl AskAgain for Scripted {
    fn ask(&mut self, steps: &[PlannedStep]) -> Answer {
        self.asked.push(steps.to_vec());
        self.answers.remove(0)
    }
}

fn applied(g: &Gated) -> Vec<&PlannedStep> {
    g.decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Apply(s) => Some(s),
            _ => None,
        })
        .collect()
}

fn left(g: &Gated) -> Vec<(&PlannedStep, &Claim, &str)> {
    g.decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Left { step, claim, why } => Some((step, claim, why.as_str())),
            _ => None,
        })
        .collect()
}

fn removes(step: &PlannedStep) -> Vec<String> {
    match &step.action {
        Action::RemoveFinalizers(r) => r.remove.clone(),
        other => panic!("not a removal: {other:?}"),
    }
}

#[test]
fn a_later_round_applies_the_shown_step_and_leaves_a_new_one_when_nobody_can_be_asked() {
    let mut consent = consent_to(&[strip("web-1", "u1", &[KEY], &[KEY])]);
    // Round 2, read afresh: web-1 again (a new resourceVersion is the same
    // step) and web-2, which the garbage collector deleted after the plan
    // was shown.
    let mut web1 = strip("web-1", "u1", &[KEY], &[KEY]);
    if let Action::RemoveFinalizers(r) = &mut web1.action {
        r.target.resource_version = Some("101".into());
    }
    let round = [web1.clone(), strip("web-2", "u2", &[KEY], &[KEY])];
    let g = consent.gate(&round, false, &mut NobodyToAsk);
    assert_eq!(applied(&g), vec![&web1]);
    let l = left(&g);
    assert_eq!(l.len(), 1, "{g:?}");
    assert_eq!(l[0].1.path, "/api/v1/namespaces/app/pods/web-2");
    assert_eq!(l[0].1.what(), format!("remove [{KEY}]"));
    assert_eq!(l[0].2, NOT_CONFIRMED);
    assert!(!g.asked);
}

#[test]
fn the_same_name_with_another_uid_is_another_object() {
    let mut consent = consent_to(&[strip("web-1", "u1", &[KEY], &[KEY])]);
    let g = consent.gate(
        &[strip("web-1", "u1-recreated", &[KEY], &[KEY])],
        false,
        &mut NobodyToAsk,
    );
    assert!(applied(&g).is_empty(), "{g:?}");
    assert_eq!(left(&g).len(), 1);
}

#[test]
fn a_key_that_was_not_shown_is_left_while_the_shown_key_goes() {
    let mut consent = consent_to(&[strip("web-1", "u1", &[KEY, OTHER], &[KEY])]);
    let g = consent.gate(
        &[strip("web-1", "u1", &[KEY, OTHER], &[KEY, OTHER])],
        false,
        &mut NobodyToAsk,
    );
    let a = applied(&g);
    assert_eq!(a.len(), 1, "{g:?}");
    assert_eq!(removes(a[0]), s(&[KEY]));
    let l = left(&g);
    assert_eq!(l.len(), 1);
    assert_eq!(removes(l[0].0), s(&[OTHER]));
    assert_eq!(l[0].1.keys, BTreeSet::from([OTHER.to_string()]));
}

#[test]
fn a_refused_finalize_is_no_consent_to_a_later_finalize() {
    // The plan shown refused /finalize while content remained; a later
    // round, with the content gone, plans it: nobody saw that step.
    let mut consent = consent_to(&[
        refuse("refusing /finalize on namespace app: content remains"),
        strip("web-1", "u1", &[KEY], &[KEY]),
    ]);
    let g = consent.gate(
        &[finalize("app", "ns-uid", &["example.com/spec-token"])],
        false,
        &mut NobodyToAsk,
    );
    assert!(applied(&g).is_empty());
    let l = left(&g);
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].1.path, "/api/v1/namespaces/app/finalize");
    assert_eq!(l[0].1.target.action, "FinalizeNamespace");
}

#[test]
fn steps_that_change_nothing_pass_without_consent() {
    let mut consent = Consent::default();
    let wait = refuse("the owner is alive");
    let g = consent.gate(std::slice::from_ref(&wait), false, &mut NobodyToAsk);
    assert_eq!(g.decisions, vec![Decision::Observe(wait)]);
}

#[test]
fn nothing_confirmed_covers_nothing() {
    let mut consent = Consent::default();
    let g = consent.gate(
        &[delete_api("v1beta1.metrics.k8s.io", "a1")],
        false,
        &mut NobodyToAsk,
    );
    assert!(applied(&g).is_empty());
    assert_eq!(left(&g).len(), 1);
}

#[test]
fn a_step_without_keys_is_covered_by_its_target() {
    let mut consent = consent_to(&[delete_api("v1beta1.metrics.k8s.io", "a1")]);
    let g = consent.gate(
        &[
            delete_api("v1beta1.metrics.k8s.io", "a1"),
            delete_api("v1beta1.metrics.k8s.io", "a2"),
        ],
        false,
        &mut NobodyToAsk,
    );
    assert_eq!(applied(&g).len(), 1);
    assert_eq!(left(&g).len(), 1);
}

#[test]
fn a_yes_in_time_extends_consent_and_is_not_asked_again() {
    let mut consent = consent_to(&[strip("web-1", "u1", &[KEY], &[KEY])]);
    let round = [
        strip("web-1", "u1", &[KEY], &[KEY]),
        strip("web-2", "u2", &[KEY], &[KEY]),
    ];
    let mut ask = Scripted::new(vec![Answer::Yes {
        shown_at: at(100),
        answered_at: at(160),
    }]);
    let g = consent.gate(&round, false, &mut ask);
    assert_eq!(applied(&g).len(), 2, "{g:?}");
    assert!(g.asked);
    // Only the new step was put to the person.
    assert_eq!(ask.asked, vec![vec![round[1].clone()]]);
    // Next round: both covered, nobody asked (the script has no answer left).
    let g = consent.gate(&round, false, &mut ask);
    assert_eq!(applied(&g).len(), 2);
    assert!(!g.asked);
}

#[test]
fn new_keys_confirmed_on_a_shown_object_make_one_write() {
    let mut consent = consent_to(&[strip("web-1", "u1", &[KEY, OTHER], &[KEY])]);
    let both = strip("web-1", "u1", &[KEY, OTHER], &[KEY, OTHER]);
    let mut ask = Scripted::new(vec![Answer::Yes {
        shown_at: at(100),
        answered_at: at(101),
    }]);
    let g = consent.gate(std::slice::from_ref(&both), false, &mut ask);
    // Two writes to one object would make the second fail its test.
    assert_eq!(g.decisions, vec![Decision::Apply(both)]);
    assert_eq!(ask.asked.len(), 1);
    assert_eq!(removes(&ask.asked[0][0]), s(&[OTHER]));
}

#[test]
fn a_no_leaves_the_step_and_it_is_not_asked_about_again() {
    let mut consent = consent_to(&[]);
    let round = [strip("web-2", "u2", &[KEY], &[KEY])];
    let mut ask = Scripted::new(vec![Answer::No]);
    let g = consent.gate(&round, false, &mut ask);
    assert!(applied(&g).is_empty());
    assert_eq!(left(&g)[0].2, "declined when asked");
    let g = consent.gate(&round, false, &mut ask);
    assert_eq!(ask.asked.len(), 1, "asked twice about a declined step");
    assert!(applied(&g).is_empty());
    assert!(left(&g)[0].2.contains("declined"), "{g:?}");
}

#[test]
fn a_late_yes_is_refused() {
    let mut consent = consent_to(&[]);
    let round = [strip("web-2", "u2", &[KEY], &[KEY])];
    let mut ask = Scripted::new(vec![Answer::Yes {
        shown_at: at(100),
        answered_at: at(100 + 6 * 60),
    }]);
    let g = consent.gate(&round, false, &mut ask);
    assert!(applied(&g).is_empty());
    let why = left(&g)[0].2;
    assert!(
        why.contains("is 6m old") && why.contains("run again"),
        "{why}"
    );
    assert!(why.contains(&at(100).to_string()), "{why}");
}

#[test]
fn a_confirmation_after_the_bound_is_refused() {
    let shown = [strip("web-1", "u1", &[KEY], &[KEY])];
    let bound = i64::try_from(MAX_PLAN_AGE.as_secs()).unwrap();
    assert!(Consent::confirmed(&shown, at(0), at(bound)).is_ok());
    let err = Consent::confirmed(&shown, at(0), at(bound + 1)).expect_err("too late");
    assert_eq!(err.age, MAX_PLAN_AGE + Duration::from_secs(1));
    assert_eq!(
        err.to_string(),
        format!(
            "the plan shown at {} is 5m1s old (more than 5m allowed between showing a plan and confirming it); run again",
            at(0)
        )
    );
}

#[test]
fn scope_consent_covers_a_scenario_run_only() {
    let round = [
        strip("web-2", "u2", &[KEY], &[KEY]),
        finalize("app", "ns-uid", &["example.com/spec-token"]),
    ];
    let g = Consent::Scope.gate(&round, true, &mut NobodyToAsk);
    assert_eq!(applied(&g).len(), 2);
    let g = Consent::Scope.gate(&round, false, &mut NobodyToAsk);
    assert!(applied(&g).is_empty());
    assert_eq!(left(&g).len(), 2);
}

#[test]
fn restrict_keeps_order_and_drops_a_step_with_no_key_left() {
    let step = strip("web-1", "u1", &[OTHER, KEY], &[OTHER, KEY]);
    let only = restrict(&step, &BTreeSet::from([KEY.to_string()])).expect("one key left");
    assert_eq!(removes(&only), s(&[KEY]));
    let Action::RemoveFinalizers(r) = &only.action else {
        unreachable!()
    };
    // The patch still tests the whole list read, and keeps the other key.
    assert_eq!(r.current, s(&[OTHER, KEY]));
    assert_eq!(r.kept(), s(&[OTHER]));
    assert_eq!(restrict(&step, &BTreeSet::new()), None);
    let api = delete_api("v1beta1.metrics.k8s.io", "a1");
    assert_eq!(restrict(&api, &BTreeSet::new()), Some(api));
}

#[test]
fn a_finalizer_removal_in_a_confirmed_terminating_namespace_is_covered_and_nothing_else() {
    // The plan shown was about namespace `app` (say, a webhook failed open
    // for it); the custom resource the namespace controller then deletes
    // hangs there on a dead finalizer.
    let mut consent = consent_to(&[]).covering_namespaces(["app".to_owned()], [KEY.to_owned()]);
    let later = strip("web-2", "u2", &[KEY], &[KEY]);
    let g = consent.gate(std::slice::from_ref(&later), false, &mut NobodyToAsk);
    assert_eq!(applied(&g), vec![&later]);
    // The namespace's own /finalize is covered too.
    let fin = finalize("app", "ns-uid", &["kubernetes"]);
    let g = consent.gate(std::slice::from_ref(&fin), false, &mut NobodyToAsk);
    assert_eq!(applied(&g), vec![&fin]);
    // Not another namespace, and never a cluster-wide change.
    let mut elsewhere = strip("db-0", "u3", &[KEY], &[KEY]);
    if let Action::RemoveFinalizers(r) = &mut elsewhere.action {
        r.target.namespace = Some("other".into());
    }
    let api = delete_api("v1beta1.metrics.k8s.io", "a1");
    let g = consent.gate(&[elsewhere, api], false, &mut NobodyToAsk);
    assert!(applied(&g).is_empty(), "{g:?}");
    assert_eq!(left(&g).len(), 2);
}

#[test]
fn in_a_confirmed_namespace_only_the_keys_shown_are_covered() {
    // Namespace `app` is a target and KEY was shown; OTHER never was.
    let mut consent = consent_to(&[]).covering_namespaces(["app".to_owned()], [KEY.to_owned()]);
    let later = strip("web-3", "u4", &[KEY, OTHER], &[KEY, OTHER]);
    let g = consent.gate(std::slice::from_ref(&later), false, &mut NobodyToAsk);
    let done = applied(&g);
    assert_eq!(done.len(), 1, "{g:?}");
    assert_eq!(removes(done[0]), s(&[KEY]), "only the shown key");
    assert_eq!(left(&g).len(), 1, "the other key is left: {g:?}");
    let unseen = strip("web-4", "u5", &[OTHER], &[OTHER]);
    let g = consent.gate(std::slice::from_ref(&unseen), false, &mut NobodyToAsk);
    assert!(applied(&g).is_empty(), "{g:?}");
}

#[test]
fn on_a_node_a_run_heals_every_pod_and_a_person_only_the_pods_shown() {
    let pod = ShownPod {
        namespace: "app".into(),
        name: "web-0".into(),
        uid: "u1".into(),
        steps: Vec::new(),
    };
    assert!(matches!(Consent::Scope.on_node(true), Consented::Every));
    // Outside a run's scope the scenario's consent covers nothing.
    assert!(matches!(
        Consent::Scope.on_node(false),
        Consented::Shown([])
    ));
    // Nothing confirmed: no pod is healed.
    assert!(matches!(
        Consent::default().on_node(false),
        Consented::Shown([])
    ));
    let confirmed = Consent::confirmed(&[], Timestamp::now(), Timestamp::now())
        .unwrap()
        .covering_pods([pod.clone()]);
    match confirmed.on_node(true) {
        Consented::Shown(pods) => assert_eq!(pods, std::slice::from_ref(&pod)),
        Consented::Every => panic!("a confirmation covers only the pods shown"),
    }
    // A run's consent is not narrowed to pods.
    assert!(matches!(
        Consent::Scope.covering_pods([pod]).on_node(true),
        Consented::Every
    ));
}

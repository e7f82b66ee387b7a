//! The streaming list's events, folded: lines recorded from a v1.34.4
//! API server (a metadata watch with `sendInitialEvents=true` on a
//! namespace holding a live ConfigMap and one held by a finalizer).

use std::collections::BTreeSet;

use kube::{
    api::{DynamicObject, WatchEvent},
    core::PartialObjectMeta,
};

use super::{Kept, Step, fold, is_blind};
use crate::doctor::collect::ListableType;

const RECORDED: &str = include_str!("streaming-list.jsonl");

fn events() -> Vec<WatchEvent<PartialObjectMeta<DynamicObject>>> {
    RECORDED
        .lines()
        .map(|l| serde_json::from_str(l).expect("a recorded watch event"))
        .collect()
}

fn configmaps() -> ListableType {
    ListableType {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        resource: "configmaps".into(),
        namespaced: true,
    }
}

/// Folds events until one is not `More`: that step and how many it took.
fn run(
    events: Vec<WatchEvent<PartialObjectMeta<DynamicObject>>>,
    terminating_ns: &BTreeSet<String>,
    kept: &mut Kept,
) -> (Result<Step, kube::Error>, usize) {
    let t = configmaps();
    let mut used = 0;
    for ev in events {
        used += 1;
        match fold(&t, ev, terminating_ns, kept) {
            Ok(Step::More) => {}
            other => return (other, used),
        }
    }
    (Ok(Step::More), used)
}

fn names(records: &[unstuck_core::doctor::ObjectRecord]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r.metadata.name.as_deref().unwrap_or(""))
        .collect()
}

#[test]
fn the_list_ends_at_the_initial_events_end_bookmark_not_at_another() {
    let mut kept = Kept::default();
    let (step, used) = run(events(), &BTreeSet::new(), &mut kept);
    // Two objects, a plain bookmark (not the end), then the end bookmark;
    // the DELETED after it is a change, not part of the list.
    assert_eq!(step.expect("no error"), Step::Done);
    assert_eq!(used, 4);
    assert_eq!(kept.seen, 2);
    assert_eq!(names(&kept.terminating), ["held"]);
    assert!(kept.namespace_content.is_empty());
}

#[test]
fn in_a_terminating_namespace_every_object_is_namespace_content() {
    let mut kept = Kept::default();
    let terminating: BTreeSet<String> = ["scale-099".to_string()].into();
    let (step, _) = run(events(), &terminating, &mut kept);
    assert_eq!(step.expect("no error"), Step::Done);
    assert_eq!(names(&kept.namespace_content), ["cm-0001", "held"]);
    assert_eq!(names(&kept.terminating), ["held"]);
}

#[test]
fn a_change_before_the_end_bookmark_makes_the_stream_unusable() {
    let mut all = events();
    // The recorded DELETED, moved before the end bookmark: a server that
    // does this does not give a list, and the doctor pages instead.
    let deleted = all.pop().expect("DELETED");
    all.insert(1, deleted);
    let mut kept = Kept::default();
    let (step, used) = run(all, &BTreeSet::new(), &mut kept);
    assert!(
        matches!(step, Ok(Step::Unexpected(_))),
        "{:?}",
        step.map_err(|e| e.to_string())
    );
    assert_eq!(used, 2);
}

#[test]
fn an_error_event_is_an_error_with_its_code() {
    let line = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (100973)","reason":"Expired","code":410}}"#;
    let ev: WatchEvent<PartialObjectMeta<DynamicObject>> =
        serde_json::from_str(line).expect("an ERROR event");
    let mut kept = Kept::default();
    let (step, _) = run(vec![ev], &BTreeSet::new(), &mut kept);
    match step {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 410),
        other => panic!("{:?}", other.map_err(|e| e.to_string())),
    }
}

#[test]
fn a_stream_that_ends_without_the_end_bookmark_is_not_done() {
    let mut all = events();
    all.truncate(3);
    let mut kept = Kept::default();
    let (step, _) = run(all, &BTreeSet::new(), &mut kept);
    assert_eq!(step.expect("no error"), Step::More);
}

#[test]
fn only_a_list_of_many_pages_is_streamed() {
    use super::worth_streaming;
    // One namespace of 1,000 objects, or a type of 20k: paged.
    assert!(!worth_streaming(Some(500)));
    assert!(!worth_streaming(Some(19_500)));
    assert!(!worth_streaming(Some(20_000)));
    // 100k objects cluster-wide: streamed.
    assert!(worth_streaming(Some(20_001)));
    assert!(worth_streaming(Some(99_500)));
    // Not counted by the server: streamed, as it may be any size.
    assert!(worth_streaming(None));
}

#[test]
fn a_blind_spot_is_a_refusal_or_a_timeout_found_by_type_not_by_text() {
    use std::io::{Error, ErrorKind};
    let status = |code: u16| {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..Default::default()
        }))
    };
    assert!(is_blind(&status(403)));
    assert!(is_blind(&status(401)));
    assert!(!is_blind(&status(404)));
    // The client's read timeout, as the connection stack wraps it.
    let timed_out =
        kube::Error::Service(Box::new(Error::new(ErrorKind::TimedOut, "read timed out")));
    assert!(is_blind(&timed_out));
    assert!(is_blind(&kube::Error::ReadEvents(Error::from(
        ErrorKind::TimedOut
    ))));
    // A message that says "timeout" is not a timeout: a refused
    // connection is no blind spot.
    let refused = kube::Error::Service(Box::new(Error::new(
        ErrorKind::ConnectionRefused,
        "connect timeout while dialing",
    )));
    assert!(!is_blind(&refused));
}

//! `doctor -n NS --save-snapshot`: the snapshot cut to what a diagnosis
//! of NS reads ([`unstuck_core::doctor::scoped`]) gives the same findings
//! about NS (and finds the same cluster-scoped blockers) as the whole one, on
//! every recorded snapshot; and it holds nothing of the other namespaces
//! that the diagnosis did not use.

mod doctor_support;

use std::{collections::BTreeSet, time::Duration};

use unstuck_core::doctor::{DiagnoseOptions, Finding, diagnose, scoped::scoped};

use doctor_support::all_snapshots;

fn opts() -> DiagnoseOptions {
    DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        ..Default::default()
    }
}

/// The findings about `ns` (objects in it, the namespace itself), whole,
/// as JSON; and the kind and subject of those about cluster-scoped
/// objects that name `ns` (a registration names every namespace it
/// blocks, and the others are cut), in order.
fn about(findings: &[Finding], ns: &str) -> Vec<serde_json::Value> {
    findings
        .iter()
        .filter_map(|f| match f.subject.namespace.as_deref() {
            Some(n) if n == ns => Some(whole(f)),
            Some(_) => None,
            None if f.subject.kind == "Namespace" => (f.subject.name == ns).then(|| whole(f)),
            // A blocker of the scope names it; one of another namespace's
            // (a webhook only its writes meet) is out of scope.
            None => serde_json::to_string(f)
                .unwrap()
                .contains(ns)
                .then(|| serde_json::json!({"kind": f.kind(), "subject": f.subject})),
        })
        .collect()
}

fn whole(f: &Finding) -> serde_json::Value {
    serde_json::from_str(&uncounted(&serde_json::to_string(f).unwrap())).unwrap()
}

/// `text` with the counts of what a search looked through ("5 leases
/// checked", "(0 checked)") made `N`: a scoped snapshot holds fewer of
/// the objects nobody used, and says so; the verdicts must not move.
fn uncounted(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let mut out = Vec::with_capacity(words.len());
    for (i, w) in words.iter().enumerate() {
        let digits = w.trim_start_matches('(');
        let counts = !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit())
            && words[i + 1..]
                .iter()
                .take(3)
                .any(|n| n.starts_with("checked"));
        out.push(if counts {
            format!("{}N", &w[..w.len() - digits.len()])
        } else {
            (*w).to_owned()
        });
    }
    out.join(" ")
}

#[test]
fn a_scoped_snapshot_diagnoses_its_scope_as_the_whole_one_does() {
    let mut compared = 0;
    for (name, s) in all_snapshots() {
        let mut scopes: BTreeSet<String> = s
            .terminating
            .iter()
            .filter_map(|r| r.namespace().map(str::to_owned))
            .collect();
        scopes.extend(
            s.namespaces
                .iter()
                .filter(|n| n.metadata.deletion_timestamp.is_some())
                .filter_map(|n| n.metadata.name.clone()),
        );
        let whole = diagnose(&s, &opts());
        for ns in scopes {
            let cut = scoped(&s, std::slice::from_ref(&ns));
            let (a, b) = (about(&whole, &ns), about(&diagnose(&cut, &opts()), &ns));
            assert!(
                a == b,
                "{name}, scope {ns}: the cut snapshot diagnoses differently\n--- whole\n{}\n--- cut\n{}",
                serde_json::to_string_pretty(&a).unwrap(),
                serde_json::to_string_pretty(&b).unwrap()
            );
            compared += 1;
        }
    }
    assert!(compared > 30, "only {compared} scopes compared");
}

#[test]
fn a_scoped_snapshot_holds_nothing_of_a_namespace_nobody_used() {
    let mut s = doctor_support::recorded("orphan-finalizer-configmap");
    // A namespace of someone else's, with a pod, an event and a Role: no
    // ServiceAccount there may update anything stuck, no backend runs there.
    let other = "payroll-prod";
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "ledger-0", "namespace": other},
        "spec": {"containers": [{"name": "c", "image": "ledger:1"}]}
    }))
    .unwrap();
    s.pods.push(pod);
    let ev: k8s_openapi::api::core::v1::Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "ledger-0.1", "namespace": other},
        "involvedObject": {"kind": "Pod", "name": "ledger-0", "namespace": other},
        "message": "payroll batch 2026-12 started"
    }))
    .unwrap();
    s.events.push(ev);
    let ns = s
        .terminating
        .iter()
        .find_map(|r| r.namespace().map(str::to_owned))
        .expect("a namespaced stuck object");
    let cut = scoped(&s, std::slice::from_ref(&ns));
    let text = serde_json::to_string(&cut).unwrap();
    assert!(!text.contains(other), "{other} is in the cut snapshot");
    assert!(
        !text.contains("payroll batch"),
        "an event of {other} is kept"
    );
    // What the scope's diagnosis reads is still there.
    assert!(cut.terminating.iter().any(|r| r.namespace() == Some(&ns)));
    assert!(
        cut.pods
            .iter()
            .all(|p| p.metadata.namespace.as_deref() != Some(other))
    );
}

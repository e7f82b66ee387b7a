//! A CRD conversion webhook whose Service is gone, on snapshots recorded
//! from real v1.34.4 clusters (`tests/recorded/README.md` says how):
//! OSM's MultiClusterService (the same schema in every version: strategy
//! None is proven lossless and planned) and OSM's MeshConfig (v1alpha2
//! adds fields: refused, naming the command a person would run).

mod doctor_support;

use std::time::Duration;

use unstuck_core::doctor::{
    Action, ConversionWebhookFacts, DiagnoseOptions, Finding, FindingDetail, FindingKind, Plan,
    PlannedStep, ServiceLookup, Snapshot, diagnose, plan,
};

use doctor_support::recorded;

/// What `unstuck doctor --stuck-after 10s` was run with on the first; the
/// second is the scenario runner's.
fn run(s: &Snapshot, stuck_after: u64) -> (Vec<Finding>, Plan) {
    let opts = DiagnoseOptions {
        stuck_after: Duration::from_secs(stuck_after),
        ..Default::default()
    };
    let findings = diagnose(s, &opts);
    let p = plan(&findings, s);
    (findings, p)
}

fn service_gone() -> Snapshot {
    recorded("crd-conversion-webhook-service-gone")
}

fn schemas_differ() -> Snapshot {
    recorded("crd-conversion-webhook-schemas-differ")
}

fn the_one(findings: &[Finding], kind: FindingKind) -> (usize, &Finding) {
    let all: Vec<(usize, &Finding)> = findings
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind() == kind)
        .collect();
    assert_eq!(all.len(), 1, "one {kind}: {findings:#?}");
    all[0]
}

fn steps_for(p: &Plan, i: usize) -> Vec<&PlannedStep> {
    p.steps.iter().filter(|s| s.finding_index == i).collect()
}

const MCS_CRD: &str = "multiclusterservices.config.openservicemesh.io";

#[test]
fn one_root_cause_names_the_crd_its_service_and_every_namespace_it_blocks() {
    let (findings, _) = run(&service_gone(), 10);
    let (_, f) = the_one(&findings, FindingKind::DeadConversionWebhook);
    assert_eq!(f.subject.kind, "CustomResourceDefinition");
    assert_eq!(f.subject.name, MCS_CRD);
    let FindingDetail::DeadConversionWebhook(ConversionWebhookFacts {
        crd,
        kind,
        service,
        backend,
        stored_versions,
        blocks_namespaces,
        failed_lists,
        no_schema_difference,
        ..
    }) = &f.detail
    else {
        panic!("detail {:?}", f.detail)
    };
    assert_eq!(crd, MCS_CRD);
    assert_eq!(kind, "MultiClusterService");
    assert_eq!(service.to_string(), "osm-system/osm-bootstrap");
    assert_eq!(backend, "ServiceNotFound");
    assert_eq!(stored_versions, &["v1alpha1", "v1alpha2"]);
    // east and west hold MultiClusterServices; quiet holds none and fails
    // on the type's list ("storage is (re)initializing").
    assert_eq!(blocks_namespaces, &["east", "quiet", "west"]);
    assert!(
        failed_lists
            .iter()
            .any(|l| l.starts_with("config.openservicemesh.io/v1alpha2: list multiclusterservices: conversion webhook for config.openservicemesh.io/v1alpha1, Kind=MultiClusterService failed")),
        "{failed_lists:#?}"
    );
    assert!(no_schema_difference);
    assert!(
        f.summary.contains("osm-system/osm-bootstrap") && f.summary.contains("east, quiet, west"),
        "{}",
        f.summary
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("Service osm-system/osm-bootstrap does not exist")),
        "{:#?}",
        f.evidence
    );
}

#[test]
fn the_namespaces_cite_the_root_cause_instead_of_refusing_one_by_one() {
    let (findings, p) = run(&service_gone(), 10);
    let (root, _) = the_one(&findings, FindingKind::DeadConversionWebhook);
    let cite = format!("#{} DeadConversionWebhook", root + 1);
    let blocked: Vec<(usize, &Finding)> = findings
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind() == FindingKind::NamespaceContentDeletionFailed)
        .collect();
    let names: Vec<&str> = blocked
        .iter()
        .map(|(_, f)| f.subject.name.as_str())
        .collect();
    assert_eq!(names, ["east", "quiet", "west"]);
    for (i, f) in blocked {
        assert!(
            f.evidence.iter().any(|e| e.contains(&format!(
                "(CRD {MCS_CRD}) fails: its Service osm-system/osm-bootstrap is gone"
            ))),
            "{:#?}",
            f.evidence
        );
        let steps = steps_for(&p, i);
        assert_eq!(steps.len(), 1);
        assert!(
            matches!(steps[0].action, Action::Wait { .. }) && steps[0].rationale.contains(&cite),
            "{}: {:?} / {}",
            f.subject.name,
            steps[0].action,
            steps[0].rationale
        );
    }
    assert!(
        !p.render_dry_run().contains("no dead webhook explains it"),
        "{}",
        p.render_dry_run()
    );
    assert!(
        findings
            .iter()
            .all(|f| f.kind() != FindingKind::NamespaceNotProgressing),
        "every namespace is explained"
    );
}

#[test]
fn identical_schemas_plan_a_guarded_switch_to_strategy_none_first() {
    let s = service_gone();
    let (findings, p) = run(&s, 10);
    let (root, _) = the_one(&findings, FindingKind::DeadConversionWebhook);
    let first = p.mutating_steps().next().expect("a change is planned");
    assert_eq!(first.finding_index, root, "{}", p.render_dry_run());
    let Action::SetCrdConversionNone(c) = &first.action else {
        panic!("{:?}", first.action)
    };
    assert!(first.action.needs_conversion_consent());
    assert!(!first.action.needs_webhook_consent());
    assert_eq!(c.crd, MCS_CRD);
    let crd = &s.conversion_webhook_crds[0];
    let ops = c.json_patch();
    let ops = ops.as_array().expect("a JSON patch");
    let test_of = |path: &str| {
        ops.iter()
            .find(|o| o["op"] == "test" && o["path"] == path)
            .map(|o| o["value"].clone())
    };
    assert_eq!(
        test_of("/metadata/uid"),
        crd.metadata.uid.clone().map(Into::into)
    );
    assert_eq!(
        test_of("/metadata/resourceVersion"),
        crd.metadata.resource_version.clone().map(Into::into)
    );
    assert_eq!(test_of("/spec/conversion/strategy"), Some("Webhook".into()));
    let last = ops.last().expect("ops");
    assert_eq!(last["op"], "replace");
    assert_eq!(last["path"], "/spec/conversion");
    assert_eq!(last["value"], serde_json::json!({"strategy": "None"}));
    assert!(
        first
            .rationale
            .starts_with("restoring Service osm-system/osm-bootstrap")
            && first.rationale.contains("no schema difference found")
            && first
                .rationale
                .contains("not checked: what the conversion webhook did")
            && !first.rationale.contains("lossless")
            && first
                .rationale
                .contains(&format!("see finding #{}", root + 1)),
        "{}",
        first.rationale
    );
    let text = p.render_dry_run();
    assert!(
        text.contains(
            "needs --allow-crd-conversion-changes=multiclusterservices.config.openservicemesh.io"
        ),
        "{text}"
    );
}

#[test]
fn different_schemas_are_refused_with_the_command_a_person_would_run() {
    let (findings, p) = run(&schemas_differ(), 3);
    let (root, f) = the_one(&findings, FindingKind::DeadConversionWebhook);
    let crd = &f.subject.name;
    assert!(crd.starts_with("meshconfigs.config-"), "{crd}");
    assert!(matches!(
        &f.detail,
        FindingDetail::DeadConversionWebhook(ConversionWebhookFacts { no_schema_difference: false, blocks_namespaces, .. })
            if blocks_namespaces.len() == 2
    ));
    let steps = steps_for(&p, root);
    assert_eq!(steps.len(), 1);
    let Action::Refuse { reason, .. } = &steps[0].action else {
        panic!("{:?}", steps[0].action)
    };
    let command = format!(
        "kubectl patch crd {crd} --type=merge -p '{{\"spec\":{{\"conversion\":{{\"strategy\":\"None\",\"webhook\":null}}}}}}'"
    );
    assert!(reason.contains(&command), "{reason}");
    assert!(
        reason.starts_with("restoring Service osm-system/osm-bootstrap"),
        "{reason}"
    );
    // What None may drop, from the CRD's own schemas.
    assert!(
        reason.contains("spec.sidecar.tlsMinProtocolVersion"),
        "{reason}"
    );
    assert!(
        p.mutating_steps().next().is_none(),
        "nothing is changed: {}",
        p.render_dry_run()
    );
    let cite = format!("#{} DeadConversionWebhook", root + 1);
    for (i, g) in findings.iter().enumerate() {
        if g.kind() == FindingKind::NamespaceContentDeletionFailed {
            assert!(
                steps_for(&p, i).iter().all(|s| s.rationale.contains(&cite)),
                "{}",
                p.render_dry_run()
            );
        }
    }
}

#[test]
fn a_backend_not_proven_gone_is_reported_and_changes_nothing() {
    let mut s = service_gone();
    let lookup = s
        .webhook_services
        .iter_mut()
        .find(|l| l.service.to_string() == "osm-system/osm-bootstrap")
        .expect("the collector looked the Service up");
    *lookup = ServiceLookup {
        service: lookup.service.clone(),
        error: Some("services \"osm-bootstrap\" is forbidden".into()),
        ..ServiceLookup::default()
    };
    let (findings, p) = run(&s, 10);
    assert!(
        findings
            .iter()
            .all(|f| f.kind() != FindingKind::DeadConversionWebhook)
    );
    assert!(p.mutating_steps().next().is_none());
    let ns = findings
        .iter()
        .find(|f| f.kind() == FindingKind::NamespaceContentDeletionFailed)
        .expect("the namespaces are still reported");
    assert!(
        ns.evidence
            .iter()
            .any(|e| e.contains("was not proven gone") && e.contains("forbidden")),
        "{:#?}",
        ns.evidence
    );
}

#[test]
fn after_the_switch_the_namespaces_wait_for_the_controllers_retry() {
    let mut s = service_gone();
    // What the next round reads: the CRD no longer converts through a
    // webhook, the namespaces' conditions are still the old ones.
    s.conversion_webhook_crds.clear();
    let (findings, p) = run(&s, 10);
    for (i, f) in findings.iter().enumerate() {
        if f.kind() == FindingKind::NamespaceContentDeletionFailed {
            let steps = steps_for(&p, i);
            assert!(
                matches!(&steps[0].action, Action::Wait { reason } if reason.contains("no longer calls a webhook")),
                "{:?}",
                steps[0].action
            );
        }
    }
    // Not when the CRDs could not be read: then nothing is known.
    s.unreadable
        .push(unstuck_core::doctor::snapshot::Unreadable {
            resource: unstuck_core::doctor::conversion::CRD_RESOURCE.into(),
            message: "forbidden".into(),
        });
    let (findings, p) = run(&s, 10);
    let i = findings
        .iter()
        .position(|f| f.kind() == FindingKind::NamespaceContentDeletionFailed)
        .expect("still reported");
    assert!(matches!(steps_for(&p, i)[0].action, Action::Refuse { .. }));
}

#[test]
fn the_conversion_ca_bundle_is_redacted_and_the_diagnosis_kept() {
    let mut s = service_gone();
    let cc = s.conversion_webhook_crds[0]
        .spec
        .conversion
        .as_mut()
        .and_then(|c| c.webhook.as_mut())
        .and_then(|w| w.client_config.as_mut())
        .expect("a client config");
    cc.ca_bundle = Some(k8s_openapi::ByteString(vec![b'x'; 2048]));
    let redacted = unstuck_core::doctor::redact::redact(&s);
    let cc = redacted.conversion_webhook_crds[0]
        .spec
        .conversion
        .as_ref()
        .and_then(|c| c.webhook.as_ref())
        .and_then(|w| w.client_config.as_ref())
        .expect("kept");
    assert_eq!(cc.ca_bundle, None);
    assert!(
        cc.service.is_some(),
        "the Service stays: it is the evidence"
    );
    assert_eq!(run(&s, 10).0, run(&redacted, 10).0);
}

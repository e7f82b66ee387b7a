//! `doctor::redact`: a snapshot safe to hand to a vendor still gives the
//! diagnosis the original gives, on every snapshot recorded in this repo,
//! and none of the values planted in a snapshot survive it.

mod doctor_support;

use std::time::Duration;

use serde_json::{Value, json};
use unstuck_core::doctor::{
    DiagnoseOptions, Snapshot, diagnose, plan,
    redact::{LAST_APPLIED, REDACTED, redact},
};
use unstuck_core::scenario::scaffold::scaffold;

/// Every file under `tests/recorded/` (and its version folders) that is a
/// doctor snapshot: the ones with a `takenAt`.
fn recorded_snapshots() -> Vec<(String, Snapshot)> {
    doctor_support::all_snapshots()
}

/// What reaches a vendor: the redacted snapshot, written and read back.
fn handed_over(s: &Snapshot) -> Snapshot {
    serde_json::from_str(&serde_json::to_string_pretty(&redact(s)).unwrap()).unwrap()
}

/// The option sets the doctor is run with: the CLI's default, the
/// runner's threshold, every deletion counted as stuck, and every
/// finalizer key of the snapshot assumed dead (the `Unknown` -> `Dead`
/// path).
fn option_sets(s: &Snapshot) -> Vec<DiagnoseOptions> {
    let mut keys: Vec<String> = s
        .terminating
        .iter()
        .chain(&s.namespace_content)
        .flat_map(|r| r.finalizers().iter().cloned())
        .collect();
    keys.sort();
    keys.dedup();
    vec![
        DiagnoseOptions::default(),
        DiagnoseOptions {
            stuck_after: Duration::from_secs(3),
            ..Default::default()
        },
        DiagnoseOptions {
            stuck_after: Duration::ZERO,
            ..Default::default()
        },
        DiagnoseOptions {
            stuck_after: Duration::ZERO,
            assume_dead: keys,
            ..Default::default()
        },
    ]
}

#[test]
fn every_recorded_snapshot_gives_the_same_findings_and_plan_once_redacted() {
    let all = recorded_snapshots();
    assert!(
        all.len() >= 20,
        "the recorded snapshots were not found: {:?}",
        all.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    let mut changed = 0;
    let mut findings_seen = 0;
    for (name, original) in &all {
        let redacted = handed_over(original);
        if redacted != *original {
            changed += 1;
        }
        for opts in option_sets(original) {
            let before = diagnose(original, &opts);
            let after = diagnose(&redacted, &opts);
            assert_eq!(before, after, "{name}: findings differ with {opts:?}");
            assert_eq!(
                plan(&before, original),
                plan(&after, &redacted),
                "{name}: plans differ with {opts:?}"
            );
            findings_seen += before.len();
        }
    }
    // Not a comparison of two untouched copies: the redaction removed
    // something from the recordings, and they hold findings to compare.
    // (Snapshots recorded since the runner redacts what it saves, such as
    // webhook-backend-*.json, do not change: a third is enough.)
    assert!(
        changed * 3 > all.len(),
        "only {changed} of {} snapshots changed",
        all.len()
    );
    assert!(findings_seen > 50, "{findings_seen} findings in all");
}

/// The same scaffold, but for annotation values: a redacted snapshot
/// keeps only the doctor's own, so a fixture made from it carries no other
/// annotation (the person adds back what the reproduction needs).
#[test]
fn new_scenario_makes_the_same_scaffold_from_a_redacted_snapshot() {
    let mut made = 0;
    for (name, original) in recorded_snapshots() {
        let mut bare = original.clone();
        let all_meta = bare
            .terminating
            .iter_mut()
            .chain(bare.namespace_content.iter_mut())
            .map(|r| &mut r.metadata)
            .chain(bare.namespaces.iter_mut().map(|n| &mut n.metadata));
        for m in all_meta {
            if let Some(a) = &mut m.annotations {
                a.retain(|k, _| k.starts_with("unstuck.dev/"));
            }
        }
        let Ok(before) = scaffold("from-snapshot", &bare) else {
            continue;
        };
        let after = scaffold("from-snapshot", &handed_over(&original))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(before, after, "{name}");
        made += 1;
    }
    assert!(made >= 10, "only {made} recorded snapshots made a scaffold");
}

#[test]
fn redacting_twice_changes_nothing_more() {
    for (name, s) in recorded_snapshots() {
        let once = redact(&s);
        assert_eq!(redact(&once), once, "{name}");
    }
}

const CA: &[u8] = b"planted-ca-bundle-bytes";

fn b64(bytes: &[u8]) -> String {
    serde_json::to_value(k8s_openapi::ByteString(bytes.to_vec()))
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// An annotation set holding a last-applied manifest with `secret` in it,
/// a long value, a JSON value and a short setting that must stay.
fn annotations(secret: &str) -> Value {
    json!({
        LAST_APPLIED: format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"stringData\":{{\"password\":\"{secret}\"}}}}\n"
        ),
        "example.com/long": format!("{secret}-{}", "x".repeat(300)),
        "example.com/json": format!("{{\"token\":\"{secret}-json\"}}"),
        "example.com/revision": "7",
        "example.com/token": format!("{secret}-short"),
    })
}

fn managed_fields(secret: &str) -> Value {
    json!([{
        "manager": "acme-operator",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2025-06-01T11:59:30Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:finalizers": {".": {}, "v:\"acme.example.com/cleanup\"": {}}},
            "f:spec": {"f:items": {format!("k:{{\"name\":\"{secret}-key\"}}"): {}}},
            "f:data": {format!("v:\"{secret}-item\""): {}}
        }
    }])
}

fn meta(name: &str, secret: &str) -> Value {
    json!({
        "name": name,
        "namespace": "shop",
        "uid": format!("uid-{name}"),
        "labels": {"app": "shop"},
        "annotations": annotations(secret),
        "managedFields": managed_fields(secret),
        "finalizers": ["acme.example.com/cleanup"],
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                             "name": "web-1", "uid": "rs-uid"}],
    })
}

/// A container spec with every value planted under `tag`.
fn container(tag: &str) -> Value {
    json!({
        "name": format!("c-{tag}"),
        "image": "registry.example/shop:1.2",
        "env": [
            {"name": "DB_PASSWORD", "value": format!("planted-{tag}-env")},
            {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}
        ],
        "args": ["--token", format!("planted-{tag}-arg")],
        "command": ["/bin/run", format!("planted-{tag}-command")],
        "lifecycle": {"preStop": {"exec": {"command": [format!("planted-{tag}-hook")]}}},
        "livenessProbe": {"httpGet": {"port": 8080, "httpHeaders": [
            {"name": "Authorization", "value": format!("planted-{tag}-header")}
        ]}},
        "readinessProbe": {"exec": {"command": [format!("planted-{tag}-probe")]}},
    })
}

fn pod_spec(tag: &str) -> Value {
    json!({
        "nodeName": "node-1",
        "serviceAccountName": "shop-sa",
        "containers": [container(&format!("{tag}-main"))],
        "initContainers": [container(&format!("{tag}-init"))],
        "ephemeralContainers": [container(&format!("{tag}-debug"))],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-claim"}},
            {"name": "csi", "csi": {"driver": "secrets.example", "volumeAttributes":
                {"secretProviderClass": format!("planted-{tag}-csi")}}},
            {"name": "flex", "flexVolume": {"driver": "x/y", "options":
                {"password": format!("planted-{tag}-flex")}}},
            {"name": "git", "gitRepo": {"repository":
                format!("https://user:planted-{tag}-git@git.example/repo")}}
        ]
    })
}

fn template(tag: &str) -> Value {
    json!({"metadata": {"labels": {"app": "shop"}, "annotations": annotations(&format!("planted-{tag}-tmpl"))},
           "spec": pod_spec(tag)})
}

fn record(kind: &str, name: &str, secret: &str) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "resource": format!("{}s", kind.to_lowercase()),
    "namespaced": true,
    "metadata": {
        "deletionTimestamp": "2025-06-01T11:00:00Z",
        "name": name, "namespace": "shop", "uid": format!("uid-{name}"),
        "finalizers": ["acme.example.com/cleanup"],
        "annotations": annotations(secret),
        "managedFields": managed_fields(secret)
    }})
}

/// A snapshot with a value planted in every place one can hide: each is
/// `planted-<where>...`.
fn planted() -> Snapshot {
    let webhook = |tag: &str| {
        json!({"metadata": meta(&format!("wh-{tag}"), &format!("planted-{tag}-meta")),
               "webhooks": [{"name": "v.example.com", "sideEffects": "None",
                             "admissionReviewVersions": ["v1"],
                             "clientConfig": {"caBundle": b64(CA),
                                              "service": {"namespace": "shop", "name": "hook"}}}]})
    };
    let terminated = json!({"exitCode": 1, "reason": "Error",
                            "message": "planted-termination-message"});
    serde_json::from_value(json!({
        "takenAt": "2025-06-01T12:00:00Z",
        "namespaces": [{"metadata": meta("shop", "planted-namespace")}],
        "apiServices": [{"metadata": meta("v1.acme.example.com", "planted-apiservice"),
                         "spec": {"group": "acme.example.com", "version": "v1",
                                  "caBundle": b64(CA),
                                  "groupPriorityMinimum": 100, "versionPriority": 100,
                                  "service": {"namespace": "shop", "name": "api"}}}],
        "terminating": [record("Secret", "db", "planted-terminating-secret")],
        "namespaceContent": [record("ConfigMap", "settings", "planted-content")],
        "pods": [{"metadata": meta("web-1-abc", "planted-pod-meta"),
                  "spec": pod_spec("pod"),
                  "status": {"phase": "Running", "containerStatuses": [{
                      "name": "c-pod-main", "image": "registry.example/shop:1.2", "imageID": "",
                      "ready": false, "restartCount": 3,
                      "state": {"terminated": terminated.clone()},
                      "lastState": {"terminated": terminated}
                  }, {
                      "name": "c-pod-side", "image": "registry.example/side:1", "imageID": "",
                      "ready": false, "restartCount": 0,
                      "state": {"waiting": {"reason": "RunContainerError",
                          "message": "exec: \"/bin/run --token planted-waiting-message\": no such file"}}
                  }, {
                      "name": "c-pod-pull", "image": "registry.example/pull:1", "imageID": "",
                      "ready": false, "restartCount": 0,
                      "state": {"waiting": {"reason": "ErrImagePull",
                          "message": "failed to pull registry.example/pull:1: not found"}}
                  }]}}],
        "leases": [{"metadata": meta("acme-leader", "planted-lease"),
                    "spec": {"holderIdentity": "acme-0"}}],
        "events": [{"metadata": meta("web.1", "planted-event"),
                    "involvedObject": {"kind": "Pod", "name": "web-1-abc", "namespace": "shop"},
                    "reason": "Killing", "message": "Stopping container c-pod-main",
                    "source": {"component": "kubelet"}, "type": "Normal"},
                   {"metadata": meta("web.2", "planted-operator-event-meta"),
                    "involvedObject": {"kind": "Pod", "name": "web-1-abc", "namespace": "shop"},
                    "reason": "Synced", "reportingComponent": "acme-operator",
                    "message": "connected with password planted-operator-event", "type": "Normal"}],
        "persistentVolumes": [{"metadata": meta("pv-1", "planted-pv-meta"),
                               "spec": {"mountOptions": ["username=app", "password=planted-pv-mount-option"],
                                        "csi": {"driver": "d", "volumeHandle": "h",
                                                "volumeAttributes": {"k": "planted-pv-csi"}},
                                        "flexVolume": {"driver": "x/y",
                                                       "options": {"k": "planted-pv-flex"}}}}],
        "nodes": [{"metadata": meta("node-1", "planted-node-meta"),
                   "status": {"images": [{"names": ["planted-node-image"]}]}}],
        "validatingWebhooks": [webhook("validating")],
        "mutatingWebhooks": [webhook("mutating")],
        "deployments": [{"metadata": meta("web", "planted-deployment-meta"),
                         "spec": {"selector": {}, "template": template("deployment")}}],
        "statefulSets": [{"metadata": meta("db", "planted-statefulset-meta"),
                          "spec": {"selector": {}, "serviceName": "db",
                                   "template": template("statefulset"),
                                   "volumeClaimTemplates": [{"metadata": meta("data", "planted-claim-meta")}]}}],
        "daemonSets": [{"metadata": meta("agent", "planted-daemonset-meta"),
                        "spec": {"selector": {}, "template": template("daemonset")}}],
    }))
    .expect("a valid snapshot")
}

/// Every distinct `planted-...` value in a JSON text.
fn planted_values(text: &str) -> std::collections::BTreeSet<String> {
    text.match_indices("planted-")
        .map(|(i, _)| {
            text[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect()
        })
        .collect()
}

#[test]
fn planted_values_are_gone_and_what_diagnosis_reads_stays() {
    let original = planted();
    let before = serde_json::to_string(&original).unwrap();
    // Every planted value made it into the snapshot (a misspelt field
    // would be dropped silently by the parser and prove nothing).
    let planted_here = planted_values(&before);
    for expected in [
        "planted-pod-main-env",
        "planted-pod-init-arg",
        "planted-pod-debug-command",
        "planted-pod-main-hook",
        "planted-pod-main-header",
        "planted-pod-main-probe",
        "planted-pod-csi",
        "planted-pod-flex",
        "planted-pod-git",
        "planted-termination-message",
        "planted-terminating-secret",
        "planted-terminating-secret-key",
        "planted-terminating-secret-item",
        "planted-terminating-secret-json",
        "planted-content",
        "planted-namespace",
        "planted-apiservice",
        "planted-lease",
        "planted-event",
        "planted-pv-csi",
        "planted-pv-flex",
        "planted-node-image",
        "planted-node-meta",
        "planted-deployment-main-env",
        "planted-deployment-tmpl",
        "planted-statefulset-init-arg",
        "planted-claim-meta",
        "planted-daemonset-debug-command",
        "planted-validating-meta",
        "planted-mutating-meta",
        "planted-namespace-short",
        "planted-operator-event",
        "planted-waiting-message",
        "planted-pv-mount-option",
    ] {
        assert!(
            planted_here.contains(expected),
            "{expected} was not planted"
        );
    }
    assert!(before.contains(&b64(CA)));

    let redacted = redact(&original);
    let after = serde_json::to_string_pretty(&redacted).unwrap();
    assert_eq!(
        planted_values(&after),
        Default::default(),
        "planted values left in:\n{after}"
    );
    assert!(!after.contains(&b64(CA)), "a caBundle is left");
    assert!(!after.contains(LAST_APPLIED));

    // What the doctor reads is still there.
    let pod = &redacted.pods[0];
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("node-1"));
    assert_eq!(spec.service_account_name.as_deref(), Some("shop-sa"));
    let main = &spec.containers[0];
    assert_eq!(main.image.as_deref(), Some("registry.example/shop:1.2"));
    let env = main.env.as_ref().unwrap();
    assert_eq!(env[0].name, "DB_PASSWORD");
    assert_eq!(env[0].value.as_deref(), Some(REDACTED));
    assert_eq!(
        env[1]
            .value_from
            .as_ref()
            .and_then(|v| v.secret_key_ref.as_ref())
            .map(|r| (r.name.as_str(), r.key.as_str())),
        Some(("db", "pw")),
        "a reference, not a value: kept"
    );
    assert_eq!(main.args.as_deref(), Some(&[REDACTED.to_owned()][..]));
    assert_eq!(
        spec.volumes.as_ref().unwrap()[0]
            .persistent_volume_claim
            .as_ref()
            .map(|c| c.claim_name.as_str()),
        Some("data-claim")
    );
    let status = &pod
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0];
    assert_eq!(status.restart_count, 3);
    let t = status.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!((t.exit_code, t.reason.as_deref()), (1, Some("Error")));

    let secret = &redacted.terminating[0].metadata;
    assert_eq!(
        secret.finalizers.as_deref().unwrap(),
        ["acme.example.com/cleanup"]
    );
    assert!(secret.deletion_timestamp.is_some());
    let ann = secret.annotations.as_ref().unwrap();
    // Keys stay; values only for the doctor's own annotations.
    assert_eq!(
        ann.get("example.com/revision").map(String::as_str),
        Some("<redacted: 1 bytes>")
    );
    assert!(ann["example.com/long"].starts_with("<redacted: "));
    let mf = &pod.metadata.managed_fields.as_ref().unwrap()[0];
    assert_eq!(mf.manager.as_deref(), Some("acme-operator"));
    assert_eq!(mf.operation.as_deref(), Some("Update"));
    assert!(mf.time.is_some());
    assert_eq!(
        mf.fields_v1.as_ref().unwrap().0,
        json!({
            "f:metadata": {"f:finalizers": {".": {}, "v:\"acme.example.com/cleanup\"": {}}},
            "f:spec": {},
            "f:data": {}
        })
    );
    assert_eq!(pod.metadata.labels, original.pods[0].metadata.labels);
    assert_eq!(
        pod.metadata.owner_references,
        original.pods[0].metadata.owner_references
    );
    assert_eq!(redacted.events[0].reason.as_deref(), Some("Killing"));
    // The kubelet's words are evidence; an operator's are not kept.
    assert_eq!(
        redacted.events[0].message.as_deref(),
        Some("Stopping container c-pod-main")
    );
    assert!(
        redacted.events[1]
            .message
            .as_deref()
            .unwrap()
            .starts_with("<redacted: ")
    );
    let pull = &pod
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[2];
    assert_eq!(
        pull.state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .message
            .as_deref(),
        Some("failed to pull registry.example/pull:1: not found")
    );
    assert_eq!(
        redacted.validating_webhooks[0].webhooks.as_ref().unwrap()[0]
            .client_config
            .service
            .as_ref()
            .map(|s| s.name.as_str()),
        Some("hook")
    );
}

#[test]
fn a_scaffold_from_a_redacted_snapshot_holds_no_marker_and_no_planted_value() {
    let made = scaffold("from-vendor", &redact(&planted())).expect("scaffold");
    let secret = made
        .fixtures
        .iter()
        .find(|(path, _)| path.contains("secret-db"))
        .unwrap_or_else(|| panic!("no fixture for the Secret: {:?}", made.fixtures));
    // A redacted annotation is left out, not re-created with its marker.
    assert!(!secret.1.contains("example.com/revision"), "{}", secret.1);
    assert!(
        secret.1.contains("acme.example.com/cleanup"),
        "{}",
        secret.1
    );
    for (path, body) in made.fixtures.iter().chain([&made.scenario]) {
        assert!(!body.contains("<redacted"), "{path}:\n{body}");
        assert!(planted_values(body).is_empty(), "{path}:\n{body}");
    }
}

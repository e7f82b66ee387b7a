//! A starting point for a scenario from what the doctor saw on a real
//! cluster (`unstuck doctor --save-snapshot`): the stuck objects become
//! fixtures (metadata only, finalizers kept), the blockers the doctor
//! proved (a dead APIService, a dead webhook) become fixtures too, and the
//! steps re-create them, delete what was Terminating, wait for the same
//! symptoms, run the doctor expecting the same findings and require
//! everything gone. Pure: the caller writes the files.
//!
//! What a snapshot cannot give is left to the person writing the scenario
//! and said in [`Scaffold::notes`]: a spec (the snapshot holds metadata
//! only), node-level faults for pods stuck on their node, and the message
//! texts worth asserting.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::doctor::{
    DiagnoseOptions, Finding, FindingDetail, FindingKind, ObjectRecord, Snapshot, diagnose,
    snapshot::display_name,
};

/// Finalizers the API server adds for a propagation policy: the scenario's
/// `delete` step adds them again, a fixture must not carry them.
const PROPAGATION_FINALIZERS: [&str; 2] = ["foregroundDeletion", "orphan"];

/// Annotations that describe how an object was applied, not what it is.
const DROPPED_ANNOTATIONS: [&str; 1] = ["kubectl.kubernetes.io/last-applied-configuration"];

/// The files of a new scenario, paths relative to the scenarios and the
/// fixtures directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scaffold {
    /// `<name>.yaml` and its text.
    pub scenario: (String, String),
    /// `<name>/<file>.yaml` and its text, in apply order.
    pub fixtures: Vec<(String, String)>,
    /// What the snapshot could not give, for the person to finish.
    pub notes: Vec<String>,
}

/// Why no scaffold could be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScaffoldError {
    #[error(
        "the snapshot shows nothing Terminating (no object or namespace with a deletionTimestamp); save it while the incident is happening"
    )]
    NothingStuck,
    #[error(
        "scenario name {0:?} is not a DNS label (lowercase letters, digits and '-', at most 40 characters)"
    )]
    BadName(String),
}

/// A built-in group: no dot (`apps`, `batch`, the core group) or one of
/// Kubernetes' own `*.k8s.io` groups.
fn is_built_in_group(group: &str) -> bool {
    !group.contains('.') || group.ends_with(".k8s.io")
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

/// A file name part: lowercase, `[a-z0-9-.]` only.
fn file_part(s: &str) -> String {
    s.chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '.') => c,
            _ => '-',
        })
        .collect()
}

/// The metadata a fixture keeps: name, labels, annotations (without
/// apply bookkeeping and values redacted away) and finalizers (without
/// the propagation ones).
fn fixture_metadata(meta: &ObjectMeta) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("name".into(), json!(meta.name.clone().unwrap_or_default()));
    if let Some(labels) = meta.labels.as_ref().filter(|l| !l.is_empty()) {
        m.insert("labels".into(), json!(labels));
    }
    let annotations: serde_json::Map<String, Value> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| !DROPPED_ANNOTATIONS.contains(&k.as_str()))
        // A value a redacted snapshot no longer holds is not re-created.
        .filter(|(_, v)| !crate::doctor::redact::is_redacted(v))
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    let finalizers = kept_finalizers(meta);
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), json!(finalizers));
    }
    Value::Object(m)
}

fn kept_finalizers(meta: &ObjectMeta) -> Vec<String> {
    meta.finalizers
        .iter()
        .flatten()
        .filter(|f| !PROPAGATION_FINALIZERS.contains(&f.as_str()))
        .cloned()
        .collect()
}

fn yaml(header: &str, doc: &Value) -> String {
    let body = serde_saphyr::to_string(doc).unwrap_or_else(|e| format!("# not rendered: {e}\n"));
    format!("{header}{body}")
}

/// A flow-style object reference for a step or a condition.
fn object_ref(api_version: &str, kind: &str, name: &str, namespace: Option<&str>) -> String {
    let mut s = String::from("{");
    if crate::scenario::default_api_version(kind) != Some(api_version) {
        let _ = write!(s, "apiVersion: {api_version}, ");
    }
    let _ = write!(s, "kind: {kind}, name: {name}");
    if let Some(ns) = namespace {
        let _ = write!(s, ", namespace: {ns}");
    }
    s.push('}');
    s
}

/// Builds the scenario `name` from `snapshot`.
pub fn scaffold(name: &str, snapshot: &Snapshot) -> Result<Scaffold, ScaffoldError> {
    let label_ok = !name.is_empty()
        && name.len() <= super::MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !label_ok {
        return Err(ScaffoldError::BadName(name.to_owned()));
    }
    // What the doctor says now: every finding, however young the deletion.
    let findings = diagnose(
        snapshot,
        &DiagnoseOptions {
            stuck_after: std::time::Duration::ZERO,
            ..Default::default()
        },
    );

    let stuck_namespaces: Vec<&k8s_openapi::api::core::v1::Namespace> = snapshot
        .namespaces
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_some())
        .collect();
    let ns_names: BTreeSet<String> = stuck_namespaces
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let mut notes = Vec::new();
    // Objects to re-create: terminating ones, and in a terminating
    // namespace whatever still carries a finalizer.
    let mut objects: Vec<&ObjectRecord> = Vec::new();
    for r in snapshot
        .terminating
        .iter()
        .chain(snapshot.namespace_content.iter())
    {
        if r.kind == "Namespace" || r.kind == "Event" {
            continue;
        }
        if r.kind == "Pod" {
            notes.push(format!(
                "pod {} is left out: a pod stuck on its node needs a node fault (busyMount, holdVolume, wedgeShim, stopKubelet, removeCniConfig, freezeCgroup) chosen from the node doctor's finding",
                display_name(&r.metadata)
            ));
            continue;
        }
        let in_stuck_ns = r.namespace().is_some_and(|ns| ns_names.contains(ns));
        let held = !kept_finalizers(&r.metadata).is_empty();
        let terminating = r.metadata.deletion_timestamp.is_some();
        // Terminating and held, cluster-scoped, or in a stuck namespace;
        // or, in a stuck namespace, held though not deleted yet.
        let keep = (terminating && (held || in_stuck_ns || r.namespace().is_none()))
            || (in_stuck_ns && held);
        if keep && !objects.iter().any(|o| o.metadata.uid == r.metadata.uid) {
            objects.push(r);
        }
    }
    if objects.is_empty() && stuck_namespaces.is_empty() {
        return Err(ScaffoldError::NothingStuck);
    }
    let mut namespaces: BTreeSet<String> = ns_names.clone();
    for o in &objects {
        if let Some(ns) = o.namespace() {
            namespaces.insert(ns.to_owned());
        }
    }

    let taken = snapshot.taken_at;
    let mut fixtures: Vec<(String, String)> = Vec::new();
    let mut steps = String::new();
    let mut symptoms = String::new();
    let mut recovered = String::new();
    let mut deletes = String::new();

    // CRDs of the custom kinds, minimal: the doctor never reads a spec.
    let mut crds: BTreeSet<(String, String, String, String, bool)> = BTreeSet::new();
    for o in &objects {
        let group = group_of(&o.api_version);
        if !is_built_in_group(group) {
            let version = o.api_version.rsplit('/').next().unwrap_or("v1");
            crds.insert((
                group.to_owned(),
                version.to_owned(),
                o.kind.clone(),
                o.resource.clone(),
                o.namespaced,
            ));
        }
    }
    for (group, version, kind, plural, namespaced) in &crds {
        let crd_name = format!("{plural}.{group}");
        let doc = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": crd_name},
            "spec": {
                "group": group,
                "names": {
                    "kind": kind, "listKind": format!("{kind}List"),
                    "plural": plural, "singular": kind.to_ascii_lowercase()
                },
                "scope": if *namespaced { "Namespaced" } else { "Cluster" },
                "versions": [{
                    "name": version, "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": true
                    }}
                }]
            }
        });
        let file = format!("{name}/crd-{}.yaml", file_part(&crd_name));
        fixtures.push((
            file.clone(),
            yaml(
                &format!("# The CRD of {kind} ({group}/{version}), minimal: replace it with the product's own when the schema matters.\n"),
                &doc,
            ),
        ));
        let _ = writeln!(steps, "  - apply: {file}");
        let _ = writeln!(
            symptoms,
            "        - condition: {{kind: CustomResourceDefinition, name: {crd_name}, type: Established, status: \"True\"}}"
        );
    }
    if !crds.is_empty() {
        let _ = writeln!(
            steps,
            "  - expect:\n      phase: symptom\n      timeout: 60s\n      that:\n{}",
            symptoms.trim_end_matches('\n')
        );
        symptoms.clear();
    }

    // Namespaces whose own metadata holds finalizers are objects too.
    for ns in &stuck_namespaces {
        let finalizers = kept_finalizers(&ns.metadata);
        let spec_tokens: Vec<String> = ns
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t != "kubernetes")
            .collect();
        if finalizers.is_empty() && spec_tokens.is_empty() {
            continue;
        }
        let nsname = ns.metadata.name.clone().unwrap_or_default();
        let mut doc =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": nsname}});
        if !finalizers.is_empty() {
            doc["metadata"]["finalizers"] = json!(finalizers);
        }
        if !spec_tokens.is_empty() {
            let mut tokens = spec_tokens.clone();
            tokens.push("kubernetes".into());
            doc["spec"] = json!({"finalizers": tokens});
        }
        let file = format!("{name}/namespace-{}.yaml", file_part(&nsname));
        fixtures.push((
            file.clone(),
            yaml(
                &format!("# Namespace {nsname} as it was stuck: its own finalizers.\n"),
                &doc,
            ),
        ));
        let _ = writeln!(steps, "  - apply: {}", file);
    }

    for o in &objects {
        let oname = o.metadata.name.clone().unwrap_or_default();
        let doc = json!({
            "apiVersion": o.api_version,
            "kind": o.kind,
            "metadata": fixture_metadata(&o.metadata),
        });
        let file = format!("{name}/{}-{}.yaml", file_part(&o.kind), file_part(&oname));
        let since = o
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|t| format!(", Terminating since {}", t.0))
            .unwrap_or_default();
        fixtures.push((
            file.clone(),
            yaml(
                &format!(
                    "# {} {} as the snapshot of {taken} saw it{since}. Metadata only: add the spec it needs.\n",
                    o.kind,
                    display_name(&o.metadata)
                ),
                &doc,
            ),
        ));
        let rel = file;
        match o.namespace() {
            Some(ns) => {
                let _ = writeln!(steps, "  - apply: {{file: {rel}, namespace: {ns}}}");
            }
            None => {
                let _ = writeln!(steps, "  - apply: {rel}");
            }
        }
        let r = object_ref(&o.api_version, &o.kind, &oname, o.namespace());
        let in_stuck_ns = o.namespace().is_some_and(|ns| ns_names.contains(ns));
        if o.metadata.deletion_timestamp.is_some() && !in_stuck_ns {
            let _ = writeln!(deletes, "  - delete: {r}");
        }
        let _ = writeln!(symptoms, "        - terminating: {r}");
        let _ = writeln!(recovered, "        - gone: {r}");
    }

    // The blockers the doctor proved, re-created as they were.
    let mut allow_webhooks = false;
    for f in &findings {
        match (&f.kind, &f.detail) {
            (FindingKind::DeadApiService, _) => {
                if let Some(api) = snapshot
                    .api_services
                    .iter()
                    .find(|a| a.metadata.name.as_deref() == Some(f.subject.name.as_str()))
                {
                    let doc = json!({
                        "apiVersion": "apiregistration.k8s.io/v1",
                        "kind": "APIService",
                        "metadata": {"name": f.subject.name},
                        "spec": api.spec,
                    });
                    let file = format!("{name}/apiservice-{}.yaml", file_part(&f.subject.name));
                    fixtures.push((
                        file.clone(),
                        yaml(
                            &format!("# The APIService the doctor proved dead: {}\n", f.summary),
                            &doc,
                        ),
                    ));
                    let _ = writeln!(steps, "  - apply: {}", file);
                    let _ = writeln!(
                        recovered,
                        "        - gone: {{kind: APIService, name: {}}}\n        - discoveryComplete: {{}}",
                        f.subject.name
                    );
                }
            }
            (FindingKind::DeadWebhook, FindingDetail::Webhook { configuration, .. }) => {
                allow_webhooks = true;
                let doc = match configuration {
                    crate::doctor::WebhookConfigKind::Validating => snapshot
                        .validating_webhooks
                        .iter()
                        .find(|w| w.metadata.name.as_deref() == Some(f.subject.name.as_str()))
                        .map(|w| json!({"webhooks": w.webhooks})),
                    crate::doctor::WebhookConfigKind::Mutating => snapshot
                        .mutating_webhooks
                        .iter()
                        .find(|w| w.metadata.name.as_deref() == Some(f.subject.name.as_str()))
                        .map(|w| json!({"webhooks": w.webhooks})),
                };
                if let Some(mut doc) = doc {
                    doc["apiVersion"] = json!("admissionregistration.k8s.io/v1");
                    doc["kind"] = json!(configuration.kind());
                    doc["metadata"] = json!({"name": f.subject.name});
                    let file = format!("{name}/webhook-{}.yaml", file_part(&f.subject.name));
                    fixtures.push((
                        file.clone(),
                        yaml(
                            &format!(
                                "# The webhook configuration the doctor proved dead: {}\n# Scope it (objectSelector or namespaceSelector) so that scenarios running beside it are not affected.\n",
                                f.summary
                            ),
                            &doc,
                        ),
                    ));
                    let _ = writeln!(steps, "  - apply: {}", file);
                }
            }
            _ => {}
        }
    }

    steps.push_str(&deletes);
    for ns in &stuck_namespaces {
        let nsname = ns.metadata.name.clone().unwrap_or_default();
        let _ = writeln!(steps, "  - delete: {{kind: Namespace, name: {nsname}}}");
        let _ = writeln!(
            symptoms,
            "        - terminating: {{kind: Namespace, name: {nsname}}}"
        );
        for c in ns
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| c.status == "True")
        {
            let _ = write!(
                symptoms,
                "        - namespaceCondition: {{namespace: {nsname}, type: {}, status: \"True\"",
                c.type_
            );
            if let Some(reason) = &c.reason {
                let _ = write!(symptoms, ", reason: {reason}");
            }
            symptoms.push_str("}\n");
            if let Some(message) = &c.message {
                let _ = writeln!(symptoms, "          # message was: {message}");
            }
        }
        let _ = writeln!(
            recovered,
            "        - gone: {{kind: Namespace, name: {nsname}}}\n        - noContentLeft: {{namespace: {nsname}}}"
        );
    }

    let kinds: BTreeSet<&str> = findings
        .iter()
        .filter(|f| f.kind != FindingKind::PodStuckTerminating)
        .map(|f| f.kind.as_str())
        .collect();
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# Made by `unstuck new-scenario` from a doctor snapshot taken at {taken}.\n# Finish it: give the fixtures the spec they need, assert the messages\n# you saw (messageContains), then `unstuck run --filter {name}`."
    );
    let _ = writeln!(text, "name: {name}");
    let _ = writeln!(
        text,
        "description: >-\n  TODO: which incident this is, what a person saw, and what the doctor\n  should do. Reproduced from a snapshot of {} stuck object(s).",
        objects.len() + stuck_namespaces.len()
    );
    let _ = writeln!(
        text,
        "# incident: owner/repo#number   (the public thread, if there is one)"
    );
    let _ = writeln!(
        text,
        "namespaces: [{}]",
        namespaces.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(text, "timeout: 4m");
    let _ = writeln!(text, "steps:");
    text.push_str(&steps);
    if !symptoms.is_empty() {
        let _ = writeln!(
            text,
            "  - expect:\n      phase: symptom\n      timeout: 90s\n      that:\n{}",
            symptoms.trim_end_matches('\n')
        );
    }
    let _ = writeln!(text, "  - doctor:");
    let _ = writeln!(
        text,
        "      expectFindings: [{}]",
        kinds.into_iter().collect::<Vec<_>>().join(", ")
    );
    if allow_webhooks {
        let _ = writeln!(text, "      allowWebhookChanges: true");
    }
    if !recovered.is_empty() {
        let _ = writeln!(
            text,
            "  - expect:\n      phase: recovered\n      timeout: 2m\n      that:\n{}",
            recovered.trim_end_matches('\n')
        );
    }
    notes.push(format!(
        "findings at the snapshot: {}",
        if findings.is_empty() {
            "none".to_owned()
        } else {
            findings
                .iter()
                .map(|f: &Finding| format!("{} ({})", f.kind.as_str(), f.subject))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    Ok(Scaffold {
        scenario: (format!("{name}.yaml"), text),
        fixtures,
        notes,
    })
}

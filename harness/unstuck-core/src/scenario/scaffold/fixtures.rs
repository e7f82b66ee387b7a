//! The fixtures of a scaffold made from what was stuck: minimal CRDs of
//! the custom kinds, namespaces with their own finalizers, and each stuck
//! object as its metadata.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::Draft;
use crate::doctor::{ObjectRecord, snapshot::display_name};

/// Finalizers the API server adds for a propagation policy: the scenario's
/// `delete` step adds them again, a fixture must not carry them.
const PROPAGATION_FINALIZERS: [&str; 2] = ["foregroundDeletion", "orphan"];

/// Annotations that describe how an object was applied, not what it is.
const DROPPED_ANNOTATIONS: [&str; 1] = ["kubectl.kubernetes.io/last-applied-configuration"];

/// A built-in group: no dot (`apps`, `batch`, the core group) or one of
/// Kubernetes' own `*.k8s.io` groups.
fn is_built_in_group(group: &str) -> bool {
    !group.contains('.') || group.ends_with(".k8s.io")
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

/// A file name part: lowercase, `[a-z0-9-.]` only.
pub(super) fn file_part(s: &str) -> String {
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

pub(super) fn kept_finalizers(meta: &ObjectMeta) -> Vec<String> {
    meta.finalizers
        .iter()
        .flatten()
        .filter(|f| !PROPAGATION_FINALIZERS.contains(&f.as_str()))
        .cloned()
        .collect()
}

pub(super) fn yaml(header: &str, doc: &Value) -> String {
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

/// A minimal CRD of a custom kind: the doctor never reads a spec.
fn crd(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {
                "kind": kind, "listKind": format!("{kind}List"),
                "plural": plural, "singular": kind.to_ascii_lowercase()
            },
            "scope": if namespaced { "Namespaced" } else { "Cluster" },
            "versions": [{
                "name": version, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true
                }}
            }]
        }
    })
}

impl Draft<'_> {
    /// CRDs of the custom kinds among `objects`, applied and waited for
    /// (Established) before anything of theirs.
    pub(super) fn crds(&mut self, objects: &[&ObjectRecord]) {
        let mut crds: BTreeSet<(String, String, String, String, bool)> = BTreeSet::new();
        for o in objects {
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
            let doc = crd(group, version, kind, plural, *namespaced);
            let file = format!("{}/crd-{}.yaml", self.name, file_part(&crd_name));
            self.fixtures.push((
                file.clone(),
                yaml(
                    &format!("# The CRD of {kind} ({group}/{version}), minimal: replace it with the product's own when the schema matters.\n"),
                    &doc,
                ),
            ));
            let _ = writeln!(self.steps, "  - apply: {file}");
            let _ = writeln!(
                self.symptoms,
                "        - condition: {{kind: CustomResourceDefinition, name: {crd_name}, type: Established, status: \"True\"}}"
            );
        }
        if !crds.is_empty() {
            let _ = writeln!(
                self.steps,
                "  - expect:\n      phase: symptom\n      timeout: 60s\n      that:\n{}",
                self.symptoms.trim_end_matches('\n')
            );
            self.symptoms.clear();
        }
    }

    /// Namespaces whose own metadata (or spec) holds finalizers are
    /// objects too.
    pub(super) fn namespace_objects(&mut self, stuck: &[&Namespace]) {
        for ns in stuck {
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
            let file = format!("{}/namespace-{}.yaml", self.name, file_part(&nsname));
            self.fixtures.push((
                file.clone(),
                yaml(
                    &format!("# Namespace {nsname} as it was stuck: its own finalizers.\n"),
                    &doc,
                ),
            ));
            let _ = writeln!(self.steps, "  - apply: {}", file);
        }
    }

    /// Each object as its metadata: applied, deleted unless its namespace's
    /// deletion takes it, Terminating as a symptom, gone at the end.
    pub(super) fn objects(&mut self, objects: &[&ObjectRecord], stuck_ns: &BTreeSet<String>) {
        for o in objects {
            let oname = o.metadata.name.clone().unwrap_or_default();
            let doc = json!({
                "apiVersion": o.api_version,
                "kind": o.kind,
                "metadata": fixture_metadata(&o.metadata),
            });
            let file = format!(
                "{}/{}-{}.yaml",
                self.name,
                file_part(&o.kind),
                file_part(&oname)
            );
            let since = o
                .metadata
                .deletion_timestamp
                .as_ref()
                .map(|t| format!(", Terminating since {}", t.0))
                .unwrap_or_default();
            self.fixtures.push((
                file.clone(),
                yaml(
                    &format!(
                        "# {} {} as the snapshot of {} saw it{since}. Metadata only: add the spec it needs.\n",
                        o.kind,
                        display_name(&o.metadata),
                        self.taken
                    ),
                    &doc,
                ),
            ));
            match o.namespace() {
                Some(ns) => {
                    let _ = writeln!(self.steps, "  - apply: {{file: {file}, namespace: {ns}}}");
                }
                None => {
                    let _ = writeln!(self.steps, "  - apply: {file}");
                }
            }
            let r = object_ref(&o.api_version, &o.kind, &oname, o.namespace());
            let in_stuck_ns = o.namespace().is_some_and(|ns| stuck_ns.contains(ns));
            if o.metadata.deletion_timestamp.is_some() && !in_stuck_ns {
                let _ = writeln!(self.deletes, "  - delete: {r}");
            }
            let _ = writeln!(self.symptoms, "        - terminating: {r}");
            let _ = writeln!(self.recovered, "        - gone: {r}");
        }
    }
}

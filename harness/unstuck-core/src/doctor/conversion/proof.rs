//! Whether switching a CRD to conversion strategy `None` shows any loss in
//! its schemas, argued from apiextensions-apiserver (v1.34.4): `None` runs
//! the `nopConverter`, which only rewrites `apiVersion`, and the object is
//! then pruned and defaulted with the schema of the version it is read in.
//! The schemas and the stored versions can show a loss; they can never
//! prove there is none: identical schemas are exactly where a conversion
//! webhook renames fields or changes units, and fields kept by
//! `x-kubernetes-preserve-unknown-fields` are not in any schema. So the
//! best this says is "no schema difference found", with what it could not
//! check, and a person names the CRD to go on.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// At most this many field paths named per side when two schemas differ.
const MAX_FIELDS: usize = 8;

/// What the schemas say about strategy `None`, and what they cannot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoneProof {
    /// No schema difference found (never a proof that nothing is lost:
    /// see [`NoneProof::unchecked`]).
    pub no_schema_difference: bool,
    /// What could not be checked, one line each (always at least what the
    /// webhook did).
    pub unchecked: Vec<String>,
    /// The argument, one fact a line.
    pub evidence: Vec<String>,
    /// In one line: what proves it, or what stands in the way.
    pub reason: String,
}

/// Argues whether switching `crd` to strategy `None` is lossless: every
/// version in `spec.versions` has the same `schema` (compared whole) and
/// the same `subresources`, and every version in `status.storedVersions`
/// is one of them. Then an object stored in any version is read in any
/// other with nothing pruned or defaulted differently, and a write through
/// any version stores what was read. Anything else, or storedVersions not
/// known, is not proven.
pub fn strategy_none_proof(crd: &CustomResourceDefinition) -> NoneProof {
    let versions = &crd.spec.versions;
    let names: Vec<&str> = versions.iter().map(|v| v.name.as_str()).collect();
    let stored: Vec<String> = stored_versions(crd);
    let mut why_not = Vec::new();
    if stored.is_empty() {
        why_not.push(
            "status.storedVersions is not recorded: which versions hold objects is not known"
                .to_owned(),
        );
    }
    for s in stored.iter().filter(|s| !names.contains(&s.as_str())) {
        why_not.push(format!(
            "stored version {s} is not in spec.versions: there is no schema to compare its objects with"
        ));
    }
    let schema = |i: usize| serde_json::to_value(&versions[i].schema).unwrap_or(Value::Null);
    let subresources =
        |i: usize| serde_json::to_value(&versions[i].subresources).unwrap_or(Value::Null);
    for i in 1..versions.len() {
        let (a, b) = (&versions[0].name, &versions[i].name);
        let (sa, sb) = (schema(0), schema(i));
        if sa != sb {
            why_not.push(schema_difference(a, &sa, b, &sb));
        }
        if subresources(0) != subresources(i) {
            why_not.push(format!(
                "versions {a} and {b} have different subresources (status/scale)"
            ));
        }
    }
    let list = format!("[{}]", names.join(", "));
    let stored_list = format!("[{}]", stored.join(", "));
    let unchecked = unchecked(crd);
    if why_not.is_empty() {
        let mut evidence = vec![
            "strategy None runs apiextensions-apiserver's nopConverter, which only rewrites apiVersion; the object is then pruned and defaulted with the schema of the version it is read in".into(),
            format!(
                "no schema difference found: every version in spec.versions {list} has the same schema (openAPIV3Schema compared whole) and the same subresources, and every stored version (status.storedVersions {stored_list}) is one of them"
            ),
        ];
        evidence.extend(unchecked.iter().map(|u| format!("not checked: {u}")));
        return NoneProof {
            no_schema_difference: true,
            reason: format!(
                "no schema difference found (every version in {list} has the same schema and subresources, and every stored version {stored_list} is one of them); not checked: {}",
                unchecked.join("; ")
            ),
            evidence,
            unchecked,
        };
    }
    let mut evidence = vec![format!(
        "strategy None loses data the schemas show (spec.versions {list}, status.storedVersions {stored_list}): it only rewrites apiVersion and the version read in prunes with its own schema"
    )];
    let reason = why_not.join("; ");
    evidence.extend(why_not);
    NoneProof {
        no_schema_difference: false,
        evidence,
        reason,
        unchecked,
    }
}

/// What the schemas cannot tell about strategy `None`: what the webhook
/// did, fields kept unknown, and defaults.
fn unchecked(crd: &CustomResourceDefinition) -> Vec<String> {
    let mut out = vec![
        "what the conversion webhook did (renamed fields, changed units or formats between versions): it is gone and cannot be asked".to_owned(),
    ];
    let mut preserved = Vec::new();
    let mut defaults = Vec::new();
    for v in &crd.spec.versions {
        let schema = serde_json::to_value(&v.schema).unwrap_or(Value::Null);
        let root = schema
            .get("openAPIV3Schema")
            .cloned()
            .unwrap_or(Value::Null);
        let (mut p, mut d) = (Vec::new(), Vec::new());
        marked(&root, "", &mut p, &mut d);
        if !p.is_empty() {
            preserved.push(format!("{} at {}", v.name, p.join(", ")));
        }
        if !d.is_empty() {
            defaults.push(format!("{} at {}", v.name, d.join(", ")));
        }
    }
    if !preserved.is_empty() {
        out.push(format!(
            "fields kept by x-kubernetes-preserve-unknown-fields ({}): they are in no schema, so no comparison sees them",
            preserved.join("; ")
        ));
    }
    if !defaults.is_empty() {
        out.push(format!(
            "defaults ({}): applied on read in the version read, whatever the webhook would have set",
            defaults.join("; ")
        ));
    }
    out
}

/// Paths (`.` for the root) where a schema keeps unknown fields, and where
/// it sets a default.
fn marked(s: &Value, at: &str, preserved: &mut Vec<String>, defaults: &mut Vec<String>) {
    let here = if at.is_empty() { "." } else { at };
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        preserved.push(here.to_owned());
    }
    if s.get("default").is_some() {
        defaults.push(here.to_owned());
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (k, child) in props {
            let p = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            marked(child, &p, preserved, defaults);
        }
    }
    if let Some(items) = s.get("items") {
        marked(items, &format!("{at}[]"), preserved, defaults);
    }
}

/// `status.storedVersions` (empty when not recorded).
pub fn stored_versions(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default()
}

/// How two versions' schemas differ, by the field paths only one has.
fn schema_difference(a: &str, sa: &Value, b: &str, sb: &Value) -> String {
    let root = |s: &Value| s.get("openAPIV3Schema").cloned().unwrap_or(Value::Null);
    let (pa, pb) = (field_paths(&root(sa)), field_paths(&root(sb)));
    let only = |x: &BTreeSet<String>, y: &BTreeSet<String>| {
        let d: Vec<&String> = x.difference(y).collect();
        let mut s = d
            .iter()
            .take(MAX_FIELDS)
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        if d.len() > MAX_FIELDS {
            s.push_str(&format!(", ... ({} in all)", d.len()));
        }
        s
    };
    let (in_a, in_b) = (only(&pa, &pb), only(&pb, &pa));
    let mut line = format!("versions {a} and {b} have different schemas");
    match (in_a.is_empty(), in_b.is_empty()) {
        (true, true) => line
            .push_str(" (the same fields, with different types, formats, defaults or validation)"),
        _ => {
            if !in_a.is_empty() {
                line.push_str(&format!("; only {a} has {in_a}"));
            }
            if !in_b.is_empty() {
                line.push_str(&format!("; only {b} has {in_b}"));
            }
            line.push_str(
                ": under None an object written with those fields and read in the other version loses them",
            );
        }
    }
    line
}

/// The field paths a structural schema declares (`spec.a.b`, `[]` for
/// array items).
fn field_paths(schema: &Value) -> BTreeSet<String> {
    fn walk(s: &Value, at: &str, out: &mut BTreeSet<String>) {
        if let Some(props) = s.get("properties").and_then(Value::as_object) {
            for (k, child) in props {
                let p = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                out.insert(p.clone());
                walk(child, &p, out);
            }
        }
        if let Some(items) = s.get("items") {
            walk(items, &format!("{at}[]"), out);
        }
    }
    let mut out = BTreeSet::new();
    walk(schema, "", &mut out);
    out
}

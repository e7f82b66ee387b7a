//! Which finalizer keys are this run's to remove, and the patch that
//! removes only those. Pure: cleanup's I/O lives in the parent module.
//!
//! A key is the run's when the scenario's own manifest put it there: the
//! object's `metadata.finalizers` as the run POSTed it (recorded with the
//! UID the server gave), a Namespace's `spec.finalizers` tokens, and the
//! keys in the templates of what controllers make from it (a Deployment's
//! pod template: the ReplicaSet controller copies those onto each pod).
//! Anything else on the run's objects was added by someone else (another
//! controller on a cluster unstuck did not create, or Kubernetes itself)
//! and is never touched.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// The finalizer keys one manifest carries, as it was sent.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ManifestKeys {
    /// `metadata.finalizers` of the object itself.
    pub own: Vec<String>,
    /// A Namespace's `spec.finalizers` tokens.
    pub spec: Vec<String>,
    /// Every `metadata.finalizers` nested deeper (pod and job templates):
    /// what the objects controllers make from this one will carry.
    pub template: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// The keys of a manifest (after the run's renaming, as POSTed).
pub fn manifest_keys(doc: &Value) -> ManifestKeys {
    let mut template = Vec::new();
    if let Some(spec) = doc.get("spec") {
        nested_keys(spec, &mut template);
    }
    template.sort();
    template.dedup();
    ManifestKeys {
        own: strings(&doc["metadata"]["finalizers"]),
        spec: if doc["kind"] == "Namespace" {
            strings(&doc["spec"]["finalizers"])
        } else {
            Vec::new()
        },
        template,
    }
}

/// Every `metadata.finalizers` below `v`, at any depth.
fn nested_keys(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if k == "metadata" {
                    out.extend(strings(&child["finalizers"]));
                }
                nested_keys(child, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| nested_keys(i, out)),
        _ => {}
    }
}

/// Adds `new` to `into`, each key once (a scenario may apply its object
/// again with another list: every key it ever put there is its own).
pub fn merge(into: &mut Vec<String>, new: &[String]) {
    for k in new {
        if !into.contains(k) {
            into.push(k.clone());
        }
    }
}

/// What removing the run's own keys from an object's list would do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    /// The run's keys present now, to be removed.
    pub removed: Vec<String>,
    /// What stays: keys the run did not add.
    pub kept: Vec<String>,
    /// A JSON patch: `test` of the UID and of the whole current list,
    /// then the list without the run's keys. A change since the read
    /// (another controller's write) makes it fail instead of being lost.
    pub patch: Value,
}

/// The release of `ours` from `current` on the object with `uid`; `None`
/// when none of the run's keys is there.
pub fn release(uid: &str, current: &[String], ours: &[String]) -> Option<Release> {
    let (removed, kept): (Vec<String>, Vec<String>) =
        current.iter().cloned().partition(|k| ours.contains(k));
    if removed.is_empty() {
        return None;
    }
    let patch = serde_json::json!([
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": "/metadata/finalizers", "value": current},
        {"op": "replace", "path": "/metadata/finalizers", "value": kept},
    ]);
    Some(Release {
        removed,
        kept,
        patch,
    })
}

/// The `spec.finalizers` tokens of a Namespace that cleanup may drop
/// through `/finalize`: the run's own tokens, and only once the
/// namespace controller has removed `kubernetes` (its content is gone);
/// `kubernetes` itself is never dropped (its content would be orphaned
/// in storage). `None` while anything else must happen first.
pub fn spec_release(current: &[String], ours: &[String]) -> Option<Vec<String>> {
    if current.is_empty() || current.iter().any(|t| t == "kubernetes") {
        return None;
    }
    let kept: Vec<String> = current
        .iter()
        .filter(|t| !ours.contains(t))
        .cloned()
        .collect();
    (kept.len() < current.len()).then_some(kept)
}

/// An object found in the run's namespaces that the run did not create
/// itself: enough of its metadata to follow its owners.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub uid: String,
    pub owners: Vec<String>,
    pub finalizers: Vec<String>,
}

/// For each found object whose chain of ownerReferences (through other
/// found objects) reaches an object the run created, the template keys of
/// those recorded ancestors it carries: the keys the run's manifests made
/// controllers put on it. `recorded` maps a recorded UID to its template
/// keys. Objects outside any recorded chain get nothing.
pub fn inherited_keys(
    found: &[Found],
    recorded: &BTreeMap<String, Vec<String>>,
) -> BTreeMap<String, Vec<String>> {
    let by_uid: BTreeMap<&str, &Found> = found.iter().map(|f| (f.uid.as_str(), f)).collect();
    let mut out = BTreeMap::new();
    for f in found {
        let mut keys: BTreeSet<&String> = BTreeSet::new();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut todo: Vec<&str> = f.owners.iter().map(String::as_str).collect();
        while let Some(uid) = todo.pop() {
            if !seen.insert(uid) {
                continue;
            }
            if let Some(k) = recorded.get(uid) {
                keys.extend(k);
            }
            if let Some(parent) = by_uid.get(uid) {
                todo.extend(parent.owners.iter().map(String::as_str));
            }
        }
        let present: Vec<String> = f
            .finalizers
            .iter()
            .filter(|k| keys.contains(k))
            .cloned()
            .collect();
        if !present.is_empty() {
            out.insert(f.uid.clone(), present);
        }
    }
    out
}

/// The keys on an object that the run did not add.
pub fn not_ours(current: &[String], ours: &[String]) -> Vec<String> {
    current
        .iter()
        .filter(|k| !ours.contains(k))
        .cloned()
        .collect()
}

/// What still holds one of the run's objects that is being deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// Only keys the run did not add (named): waiting longer is waiting
    /// on their owner, whom cleanup must not overrule.
    Others(Vec<String>),
    /// A key of the run's own, or nothing cleanup can name yet.
    NotOnlyOthers,
}

/// Who holds an object being deleted: its `metadata.finalizers`; for a
/// Namespace also its `spec.finalizers` and, while `kubernetes` is still
/// there, the keys on its content that the namespace controller's
/// `NamespaceFinalizersRemaining` message names (`finalizers_remaining`).
/// `ours` is every key and token the run added anywhere.
pub fn holder(
    finalizers: &[String],
    spec_finalizers: &[String],
    finalizers_remaining: Option<&str>,
    ours: &[String],
) -> Holder {
    if finalizers.iter().any(|k| ours.contains(k)) {
        return Holder::NotOnlyOthers;
    }
    let mut others = finalizers.to_vec();
    for token in spec_finalizers {
        if token == "kubernetes" {
            // The namespace controller's: it waits on the content. Only
            // keys on the content it names can be judged.
            let content: Vec<String> = finalizers_remaining
                .map(unstuck_core::doctor::conditions::parse_finalizers_remaining)
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.finalizer)
                .collect();
            if content.is_empty() || content.iter().any(|k| ours.contains(k)) {
                return Holder::NotOnlyOthers;
            }
            merge(&mut others, &content);
        } else if ours.contains(token) {
            return Holder::NotOnlyOthers;
        } else {
            merge(&mut others, std::slice::from_ref(token));
        }
    }
    if others.is_empty() {
        Holder::NotOnlyOthers
    } else {
        Holder::Others(others)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_manifest_gives_its_own_its_spec_and_its_template_keys() {
        // fixtures/foreground-deletion-chain/deployment.yaml, in short.
        let deploy = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"template": {"metadata": {"labels": {"app": "web"},
                                               "finalizers": ["pods.guard.example.com/protect"]},
                                  "spec": {"containers": []}}}
        });
        let k = manifest_keys(&deploy);
        assert!(k.own.is_empty() && k.spec.is_empty());
        assert_eq!(k.template, s(&["pods.guard.example.com/protect"]));

        // fixtures/namespace-spec-finalizer/namespace.yaml plus a metadata key.
        let ns = serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "app", "finalizers": ["finalizers.kubesphere.io/namespaces"]},
            "spec": {"finalizers": ["kubernetes", "example.com/removed-product"]}
        });
        let k = manifest_keys(&ns);
        assert_eq!(k.own, s(&["finalizers.kubesphere.io/namespaces"]));
        assert_eq!(k.spec, s(&["kubernetes", "example.com/removed-product"]));
        assert!(k.template.is_empty(), "{k:?}");

        // A CronJob: its job template and the pod template inside it.
        let cron = serde_json::json!({
            "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"jobTemplate": {"metadata": {"finalizers": ["a.example.com/job"]},
                     "spec": {"template": {"metadata": {"finalizers": ["b.example.com/pod"]}}}}}
        });
        assert_eq!(
            manifest_keys(&cron).template,
            s(&["a.example.com/job", "b.example.com/pod"])
        );
    }

    #[test]
    fn release_removes_only_the_runs_keys_and_tests_uid_and_list() {
        let current = s(&["other.example.com/keep", "scenario.example.com/mine"]);
        let r = release("u-1", &current, &s(&["scenario.example.com/mine"])).expect("a release");
        assert_eq!(r.removed, s(&["scenario.example.com/mine"]));
        assert_eq!(r.kept, s(&["other.example.com/keep"]));
        assert_eq!(
            r.patch,
            serde_json::json!([
                {"op": "test", "path": "/metadata/uid", "value": "u-1"},
                {"op": "test", "path": "/metadata/finalizers", "value": current},
                {"op": "replace", "path": "/metadata/finalizers", "value": ["other.example.com/keep"]},
            ])
        );
        // Nothing of the run's there: no patch at all, never a strip.
        assert_eq!(
            release("u-1", &s(&["other.example.com/keep"]), &s(&["x/y"])),
            None
        );
        assert_eq!(release("u-1", &[], &s(&["x/y"])), None);
    }

    #[test]
    fn spec_tokens_go_only_after_kubernetes_and_only_the_runs() {
        let ours = s(&["kubernetes", "example.com/removed-product"]);
        // Content not gone yet: the controller still holds `kubernetes`.
        assert_eq!(
            spec_release(&s(&["kubernetes", "example.com/removed-product"]), &ours),
            None
        );
        assert_eq!(
            spec_release(&s(&["example.com/removed-product"]), &ours),
            Some(vec![])
        );
        // Another's token stays.
        assert_eq!(
            spec_release(&s(&["example.com/removed-product", "other.io/x"]), &ours),
            Some(s(&["other.io/x"]))
        );
        assert_eq!(spec_release(&s(&["other.io/x"]), &ours), None);
        assert_eq!(spec_release(&[], &ours), None);
    }

    #[test]
    fn children_inherit_only_their_recorded_ancestors_template_keys() {
        let found = vec![
            // ReplicaSet made by the run's Deployment.
            Found {
                uid: "rs".into(),
                owners: s(&["deploy"]),
                finalizers: vec![],
            },
            // Its pod: the template key, and another controller's key.
            Found {
                uid: "pod".into(),
                owners: s(&["rs"]),
                finalizers: s(&["pods.guard.example.com/protect", "other.example.com/keep"]),
            },
            // A pod of someone else's ReplicaSet, same key: not the run's.
            Found {
                uid: "stranger".into(),
                owners: s(&["their-rs"]),
                finalizers: s(&["pods.guard.example.com/protect"]),
            },
            // A cycle of owners must not hang.
            Found {
                uid: "a".into(),
                owners: s(&["b"]),
                finalizers: s(&["pods.guard.example.com/protect"]),
            },
            Found {
                uid: "b".into(),
                owners: s(&["a"]),
                finalizers: vec![],
            },
        ];
        let recorded =
            BTreeMap::from([("deploy".to_string(), s(&["pods.guard.example.com/protect"]))]);
        let got = inherited_keys(&found, &recorded);
        assert_eq!(
            got,
            BTreeMap::from([("pod".to_string(), s(&["pods.guard.example.com/protect"]))])
        );
    }

    #[test]
    fn an_object_is_held_by_others_only_when_no_key_of_the_runs_is_left() {
        let ours = s(&["scenario.example.com/mine", "kubernetes"]);
        let other = s(&["other.example.com/keep"]);
        assert_eq!(
            holder(&other, &[], None, &ours),
            Holder::Others(other.clone())
        );
        assert_eq!(
            holder(
                &s(&["other.example.com/keep", "scenario.example.com/mine"]),
                &[],
                None,
                &ours
            ),
            Holder::NotOnlyOthers
        );
        // Nothing named: nothing to blame on anyone.
        assert_eq!(holder(&[], &[], None, &ours), Holder::NotOnlyOthers);
        // A namespace still holding `kubernetes`: judged by its content's
        // keys, as the namespace controller names them (recorded v1.34 text).
        let msg = "Some content in the namespace has finalizers remaining: other.example.com/keep in 1 resource instances";
        assert_eq!(
            holder(&other, &s(&["kubernetes"]), Some(msg), &ours),
            Holder::Others(other.clone())
        );
        let mixed = "Some content in the namespace has finalizers remaining: other.example.com/keep in 1 resource instances, scenario.example.com/mine in 1 resource instances";
        assert_eq!(
            holder(&other, &s(&["kubernetes"]), Some(mixed), &ours),
            Holder::NotOnlyOthers
        );
        assert_eq!(
            holder(&other, &s(&["kubernetes"]), None, &ours),
            Holder::NotOnlyOthers,
            "content not named yet"
        );
        // A spec token of someone else's holds it as well.
        assert_eq!(
            holder(&[], &s(&["other.io/token"]), None, &ours),
            Holder::Others(s(&["other.io/token"]))
        );
    }

    #[test]
    fn merging_keeps_every_key_once() {
        let mut k = s(&["a/x"]);
        merge(&mut k, &s(&["a/x", "b/y"]));
        assert_eq!(k, s(&["a/x", "b/y"]));
        assert_eq!(
            not_ours(&s(&["a/x", "c/z"]), &k),
            s(&["c/z"]),
            "keys the run did not add"
        );
    }
}

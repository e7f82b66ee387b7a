//! Removing the run's own finalizer keys from what it created (and from
//! what controllers made from its templates), each write bound to the
//! UID read and the list it replaces.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams, Patch, PatchParams, PostParams},
};

use super::{CleanupReport, Created, keys, read};
use crate::{
    doctor::collect,
    runner::objects::{api_for, resolve_if_served},
};

/// Removes the run's own keys `ours` from the object `c` names (read by
/// name, UID checked, the patch `test`s UID and list). Returns what is
/// there afterwards, or `None` when the object is gone.
pub(super) async fn release(
    client: &Client,
    c: &Created,
    ours: &[String],
    report: &mut CleanupReport,
) -> Option<DynamicObject> {
    let obj = match read(client, c).await {
        Ok(obj) => obj?,
        Err(e) => {
            report
                .failed
                .push(format!("removing this run's keys from {c}: {e}"));
            return None;
        }
    };
    let current = obj.metadata.finalizers.clone().unwrap_or_default();
    let Some(r) = keys::release(&c.uid, &current, ours) else {
        return Some(obj);
    };
    let (ar, caps) = match resolve_if_served(client, &c.api_version, &c.kind).await {
        Ok(found) => found?,
        Err(e) => {
            report
                .failed
                .push(format!("removing this run's keys from {c}: {e}"));
            return Some(obj);
        }
    };
    let api = api_for(client, &ar, &caps, c.namespace.as_deref());
    let patch: json_patch::Patch = match serde_json::from_value(r.patch) {
        Ok(p) => p,
        Err(e) => {
            report
                .failed
                .push(format!("removing this run's keys from {c}: the patch: {e}"));
            return Some(obj);
        }
    };
    match api
        .patch(&c.name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
    {
        Ok(after) => {
            report.forced.push(format!(
                "{c}: removed this run's finalizer(s) {}{}",
                r.removed.join(", "),
                if r.kept.is_empty() {
                    String::new()
                } else {
                    format!(" (kept {}: not this run's)", r.kept.join(", "))
                }
            ));
            Some(after)
        }
        // Changed since the read (its test failed) or gone: the next
        // round reads it again.
        Err(kube::Error::Api(s)) if benign(s.code) => Some(obj),
        Err(e) => {
            report.failed.push(format!(
                "removing this run's keys from {c}: {}",
                crate::kube_error::text(&e)
            ));
            Some(obj)
        }
    }
}

/// Answers to a write bound to what was read that mean "read again": gone
/// (404), changed since (409), a JSON patch `test` that failed (422).
fn benign(code: u16) -> bool {
    matches!(code, 404 | 409 | 422)
}

/// Drops the run's own `spec.finalizers` tokens of a namespace whose
/// content is gone (PUT /finalize with the namespace just read: its UID
/// and resourceVersion bind the write). `kubernetes` is never dropped.
pub(super) async fn release_spec(
    client: &Client,
    c: &Created,
    obj: &DynamicObject,
    report: &mut CleanupReport,
) {
    let mut ns = match serde_json::to_value(obj).and_then(serde_json::from_value::<Namespace>) {
        Ok(ns) => ns,
        Err(e) => {
            report
                .failed
                .push(format!("reading {c} as a Namespace: {e}"));
            return;
        }
    };
    let current = ns
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.clone())
        .unwrap_or_default();
    let Some(kept) = keys::spec_release(&current, &c.keys.spec) else {
        return;
    };
    if ns.metadata.uid.as_deref() != Some(c.uid.as_str()) {
        return;
    }
    ns.spec.get_or_insert_default().finalizers = Some(kept.clone());
    let api: Api<Namespace> = Api::all(client.clone());
    match api
        .replace_subresource("finalize", &c.name, &PostParams::default(), &ns)
        .await
    {
        Ok(_) => report.forced.push(format!(
            "{c}: removed this run's spec.finalizers token(s) {} after its content was gone",
            keys::not_ours(&current, &kept).join(", ")
        )),
        Err(kube::Error::Api(s)) if benign(s.code) => {}
        Err(e) => report
            .failed
            .push(format!("finalizing {c}: {}", crate::kube_error::text(&e))),
    }
}

/// Removes the run's own keys from what it created in `namespaces`, from
/// the namespaces themselves, and from the objects controllers made from
/// its templates there.
pub(super) async fn release_in_namespaces(
    client: &Client,
    created: &[Created],
    namespaces: &[&Created],
    report: &mut CleanupReport,
) {
    let names: Vec<&str> = namespaces.iter().map(|c| c.name.as_str()).collect();
    let inside = |c: &&Created| c.namespace.as_deref().is_some_and(|n| names.contains(&n));
    for c in created.iter().filter(inside) {
        release(client, c, &c.keys.own, report).await;
    }
    for c in namespaces {
        release(client, c, &c.keys.own, report).await;
    }
    let templates: BTreeMap<String, Vec<String>> = created
        .iter()
        .filter(inside)
        .filter(|c| !c.keys.template.is_empty())
        .map(|c| (c.uid.clone(), c.keys.template.clone()))
        .collect();
    if templates.is_empty() {
        return;
    }
    for (child, keys) in made_from_templates(client, &names, &templates, report).await {
        release(client, &child, &keys, report).await;
    }
}

/// The objects in `namespaces` whose owners lead to a recorded object with
/// template keys, each with the keys of those it carries.
async fn made_from_templates(
    client: &Client,
    namespaces: &[&str],
    templates: &BTreeMap<String, Vec<String>>,
    report: &mut CleanupReport,
) -> Vec<(Created, Vec<String>)> {
    let discovered = match collect::discover(client).await {
        Ok(d) => d,
        Err(e) => {
            report.failed.push(format!(
                "finding the pods made from this run's templates: discovery: {}",
                crate::kube_error::text(&e)
            ));
            return Vec::new();
        }
    };
    let mut found: Vec<(Created, keys::Found)> = Vec::new();
    for t in discovered.types.iter().filter(|t| t.namespaced) {
        for ns in namespaces {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), ns, &t.api_resource());
            let list = match api.list_metadata(&ListParams::default()).await {
                Ok(list) => list,
                Err(e) => {
                    report.failed.push(format!(
                        "listing {} in {ns}: {}",
                        t.resource,
                        crate::kube_error::text(&e)
                    ));
                    continue;
                }
            };
            for o in list.items {
                let Some(uid) = o.metadata.uid.clone() else {
                    continue;
                };
                // A type served in two versions lists the same object twice.
                if found.iter().any(|(_, f)| f.uid == uid) {
                    continue;
                }
                found.push((
                    Created {
                        api_version: t.api_version.clone(),
                        kind: t.kind.clone(),
                        namespace: Some(ns.to_string()),
                        name: o.metadata.name.clone().unwrap_or_default(),
                        uid: uid.clone(),
                        keys: Default::default(),
                    },
                    keys::Found {
                        uid,
                        owners: o
                            .metadata
                            .owner_references
                            .iter()
                            .flatten()
                            .map(|r| r.uid.clone())
                            .collect(),
                        finalizers: o.metadata.finalizers.clone().unwrap_or_default(),
                    },
                ));
            }
        }
    }
    let plain: Vec<keys::Found> = found.iter().map(|(_, f)| f.clone()).collect();
    let inherited = keys::inherited_keys(&plain, templates);
    found
        .into_iter()
        .filter_map(|(c, _)| inherited.get(&c.uid).map(|k| (c.clone(), k.clone())))
        .collect()
}

//! `apply`: each document of a fixture file created under the run's names
//! (or, for an object of this run's applied again, replaced while it is
//! still the one the run made), and recorded for cleanup with the
//! finalizer keys it carried.

use kube::discovery::Scope;
use unstuck_core::scenario::ApplySpec;

use super::{Evidence, ScenarioRun, StepError};
use crate::runner::{
    Created, cleanup, create,
    objects::{api_for, read_manifests, resolve},
};

pub(super) async fn run(
    run: &mut ScenarioRun<'_>,
    spec: &ApplySpec,
) -> Result<Evidence, StepError> {
    let path = run.ctx.fixtures_dir.join(&*spec.file);
    let namespace = spec.namespace.as_deref().map(String::as_str);
    tracing::debug!(target: crate::STEP_LOG, "apply step begins: {}", path.display());
    let mut evidence = Vec::new();
    for mut doc in read_manifests(&path)? {
        let logical = doc["metadata"]["name"].as_str().map(str::to_string);
        run.names.document(&mut doc);
        run.names.service_references(&mut doc);
        let field = |field| StepError::NoField {
            path: path.clone(),
            field,
        };
        let api_version = doc["apiVersion"]
            .as_str()
            .ok_or_else(|| field("apiVersion"))?
            .to_string();
        let kind = doc["kind"]
            .as_str()
            .ok_or_else(|| field("kind"))?
            .to_string();
        let logical = logical.ok_or_else(|| StepError::NoName {
            path: path.clone(),
            kind: kind.clone(),
        })?;
        let (ar, caps) = resolve(&run.ctx.client, &api_version, &kind).await?;
        let real_ns = match (&caps.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Some(run.names.namespace(ns)),
            (Scope::Namespaced, None) => {
                return Err(StepError::NeedsNamespace {
                    path,
                    kind,
                    name: logical,
                });
            }
            (Scope::Cluster, _) => None,
        };
        let name = run.names.object(&kind, &logical, real_ns.is_some());
        doc["metadata"]["name"] = serde_json::Value::String(name.clone());
        if let Some(ns) = &real_ns {
            doc["metadata"]["namespace"] = serde_json::Value::String(ns.clone());
        } else {
            // The run's mark on what outlives its namespaces: how a sweep
            // after a SIGKILL tells the run's object from another of that name.
            label_run(&mut doc, run.names.run());
        }
        let api = api_for(&run.ctx.client, &ar, &caps, real_ns.as_deref());
        let label = format!(
            "{kind} {}{name}",
            real_ns
                .as_deref()
                .map(|n| format!("{n}/"))
                .unwrap_or_default()
        );
        let is_it = |c: &Created| c.kind == kind && c.namespace == real_ns && c.name == name;
        let ours = run.created.iter().find(|c| is_it(c)).map(|c| c.uid.clone());
        let keys = cleanup::keys::manifest_keys(&doc);
        if ours.is_none() {
            run.journal(Some(&Created {
                api_version: api_version.clone(),
                kind: kind.clone(),
                namespace: real_ns.clone(),
                name: name.clone(),
                uid: String::new(),
                keys: keys.clone(),
            }))?;
        }
        let made =
            create::create_or_replace_ours(&api, &doc, &name, &label, ours.as_deref()).await?;
        let again = ours.is_some() && !made.replaced;
        // The keys as sent (`keys`): what cleanup may take off this UID again.
        match run.created.iter_mut().find(|c| is_it(c)) {
            Some(c) => {
                c.uid = made.uid;
                cleanup::keys::merge(&mut c.keys.own, &keys.own);
                cleanup::keys::merge(&mut c.keys.spec, &keys.spec);
                cleanup::keys::merge(&mut c.keys.template, &keys.template);
            }
            None => run.created.push(Created {
                api_version,
                kind: kind.clone(),
                namespace: real_ns.clone(),
                name: name.clone(),
                uid: made.uid,
                keys,
            }),
        }
        run.journal(None)?;
        evidence.push(format!(
            "{} {label}",
            if made.replaced {
                "replaced this run's"
            } else if again {
                "created again (this run's earlier one is gone)"
            } else {
                "created"
            }
        ));
    }
    Ok(evidence)
}

/// Labels `doc` as run `run`'s ([`crate::runner::journal::RUN_LABEL`]).
fn label_run(doc: &mut serde_json::Value, run: &str) {
    let meta = &mut doc["metadata"];
    if !meta["labels"].is_object() {
        meta["labels"] = serde_json::json!({});
    }
    meta["labels"][crate::runner::journal::RUN_LABEL] = serde_json::Value::String(run.to_owned());
}

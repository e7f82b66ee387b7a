//! Set-up before the first step: the scenario's namespaces, under the
//! run's names, except those a fixture defines (created by its `apply`,
//! because some fields, such as `spec.finalizers`, can only be set when a
//! namespace is created).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Api;

use super::{ScenarioRun, StepError};
use crate::runner::{Created, objects::read_manifests};

pub(in crate::runner) async fn create(run: &mut ScenarioRun<'_>) -> Result<(), StepError> {
    let api: Api<Namespace> = Api::all(run.ctx.client.clone());
    // Logical namespaces a fixture defines as a Namespace object. A
    // fixture that cannot be read fails here, before anything is created,
    // rather than at its apply step.
    let mut from_fixtures = Vec::new();
    for f in run.scenario.fixture_files() {
        for d in read_manifests(&run.ctx.fixtures_dir.join(f))? {
            if d["kind"] == "Namespace"
                && let Some(n) = d["metadata"]["name"].as_str()
            {
                from_fixtures.push(run.names.namespace(n));
            }
        }
    }
    let mut made_here = Vec::new();
    for real in run.names.namespaces().real_names() {
        if from_fixtures.contains(&real) {
            // Created (and recorded) by its apply step.
            continue;
        }
        made_here.push(real.clone());
        let obj: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": real, "labels": {
                "unstuck.dev/scenario": run.scenario.name.as_str(),
                crate::runner::journal::RUN_LABEL: run.names.run(),
            }}
        }))
        .expect("static namespace");
        let about_to = Created {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: None,
            name: real.clone(),
            uid: String::new(),
            keys: Default::default(),
        };
        run.journal(Some(&about_to))?;
        let made = api
            .create(&Default::default(), &obj)
            .await
            .map_err(|source| StepError::CreateNamespace {
                name: real.clone(),
                source,
            })?;
        run.created.push(Created {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: None,
            name: real,
            uid: made.metadata.uid.unwrap_or_default(),
            keys: Default::default(),
        });
        run.journal(None)?;
    }
    for ns in made_here {
        default_service_account(run, &ns).await;
    }
    Ok(())
}

/// Waits (at most a minute) for the namespace's `default` ServiceAccount:
/// a pod that names none is refused until the controller has made it
/// ("error looking up service account .../default"), and on a loaded
/// cluster that takes seconds. Past the bound the apply step fails with
/// the API server's own words.
async fn default_service_account(run: &ScenarioRun<'_>, ns: &str) {
    let api: Api<ServiceAccount> = Api::namespaced(run.ctx.client.clone(), ns);
    let _ = crate::wait::until(
        format!("ServiceAccount {ns}/default"),
        Duration::from_secs(60),
        Duration::from_millis(250),
        || async {
            match api.get_opt("default").await {
                Ok(Some(_)) => crate::wait::Poll::Ready(()),
                Ok(None) => crate::wait::Poll::Pending("not made yet".into()),
                Err(e) => crate::wait::Poll::Pending(e.to_string()),
            }
        },
    )
    .await;
}

//! `delete`: one object, by the run's name, without waiting for it to go
//! (an `expect` step does that). Outside the run's namespaces only an
//! object this run created, by UID, may be deleted.

use std::time::Instant;

use kube::{
    api::{DeleteParams, Preconditions},
    discovery::Scope,
};
use unstuck_core::scenario::{DeleteSpec, PropagationPolicy};

use super::{Evidence, ScenarioRun, StepError};
use crate::runner::objects::{api_for, resolve};

pub(super) async fn run(run: &mut ScenarioRun<'_>, d: &DeleteSpec) -> Result<Evidence, StepError> {
    let r = &d.object;
    let api_version =
        run.names
            .api_version(r.api_version().ok_or_else(|| StepError::NoApiVersion {
                kind: r.kind.to_string(),
            })?);
    let (ar, caps) = resolve(&run.ctx.client, &api_version, &r.kind).await?;
    let ns = r.namespace.as_ref().map(|n| run.names.namespace(n));
    let namespaced = matches!(caps.scope, Scope::Namespaced);
    let name = run.names.object(&r.kind, &r.name, namespaced);
    let api = api_for(&run.ctx.client, &ar, &caps, ns.as_deref());
    // The object this run created, by UID; outside the run's namespaces
    // nothing else may be deleted.
    let uid = run
        .created
        .iter()
        .find(|c| c.kind == *r.kind && c.namespace == ns && c.name == name)
        .map(|c| c.uid.clone());
    if !namespaced && uid.is_none() {
        return Err(StepError::NotOurs {
            kind: r.kind.to_string(),
            name,
        });
    }
    let dp = DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        propagation_policy: d.propagation_policy.map(|p| match p {
            PropagationPolicy::Foreground => kube::api::PropagationPolicy::Foreground,
            PropagationPolicy::Background => kube::api::PropagationPolicy::Background,
            PropagationPolicy::Orphan => kube::api::PropagationPolicy::Orphan,
        }),
        ..DeleteParams::default()
    };
    api.delete(&name, &dp)
        .await
        .map_err(|source| StepError::Delete {
            what: format!("{} {name}", *r.kind),
            source,
        })?;
    run.last_injection = Some(Instant::now());
    Ok(vec![format!(
        "DELETE {} {}{name} accepted{}",
        *r.kind,
        ns.map(|n| format!("{n}/")).unwrap_or_default(),
        d.propagation_policy
            .map(|p| format!(" (propagationPolicy {p})"))
            .unwrap_or_default()
    )])
}

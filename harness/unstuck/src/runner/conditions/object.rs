//! Conditions on one object (or the objects of a name prefix): being
//! deleted, gone, running, ready.

use crate::text;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use unstuck_core::scenario::LogicalRef;

use super::{
    CheckContext, CheckError, CheckResult, describe,
    lookup::{Served, existing, get, get_if_served, with_prefix},
    real_namespace, verdict,
};

pub(super) async fn terminating_with_prefix(ctx: &CheckContext<'_>, r: &LogicalRef) -> CheckResult {
    let found = with_prefix(ctx, r).await?;
    let names: Vec<String> = found
        .iter()
        .map(|o| o.metadata.name.clone().unwrap_or_default())
        .collect();
    match found
        .into_iter()
        .find(|o| o.metadata.deletion_timestamp.is_some())
    {
        Some(obj) => Ok(format!(
            "{} {} has deletionTimestamp {} and finalizers {}",
            *r.kind,
            real_namespace(ctx, r)
                .map(|ns| format!("{ns}/"))
                .unwrap_or_default()
                + obj.metadata.name.as_deref().unwrap_or_default(),
            obj.metadata
                .deletion_timestamp
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            text::list(&obj.metadata.finalizers.unwrap_or_default())
        )),
        None => Err(CheckError::Unmet(format!(
            "no {} is being deleted (found: {})",
            describe(ctx, r),
            text::list(&names)
        ))),
    }
}

pub(super) async fn gone_with_prefix(ctx: &CheckContext<'_>, r: &LogicalRef) -> CheckResult {
    let found = with_prefix(ctx, r).await?;
    let names: Vec<String> = found
        .iter()
        .map(|o| o.metadata.name.clone().unwrap_or_default())
        .collect();
    if names.is_empty() {
        Ok(format!("no {} exists", describe(ctx, r)))
    } else {
        Err(CheckError::Unmet(format!(
            "{} still exist: {}",
            describe(ctx, r),
            text::list(&names)
        )))
    }
}

pub(super) async fn terminating(ctx: &CheckContext<'_>, r: &LogicalRef) -> CheckResult {
    let obj = get(ctx, r)
        .await?
        .ok_or_else(|| CheckError::Unmet(format!("{} does not exist", describe(ctx, r))))?;
    match &obj.metadata.deletion_timestamp {
        Some(ts) => Ok(format!(
            "{} has deletionTimestamp {} and finalizers {}",
            describe(ctx, r),
            ts.0,
            text::list(&obj.metadata.finalizers.unwrap_or_default())
        )),
        None => Err(CheckError::Unmet(format!(
            "{} exists but is not being deleted",
            describe(ctx, r)
        ))),
    }
}

pub(super) async fn gone(ctx: &CheckContext<'_>, r: &LogicalRef) -> CheckResult {
    match get_if_served(ctx, r).await? {
        Served::No(api_version) => Ok(format!(
            "{} is gone: the API no longer serves {api_version} {} (its CRD is gone)",
            describe(ctx, r),
            *r.kind
        )),
        Served::Yes(None) => Ok(format!("{} is gone (GET returns 404)", describe(ctx, r))),
        Served::Yes(Some(obj)) => Err(CheckError::Unmet(format!(
            "{} still exists (deletionTimestamp {}, finalizers {})",
            describe(ctx, r),
            text::or_none(
                obj.metadata
                    .deletion_timestamp
                    .map(|t| t.0.to_string())
                    .as_deref()
            ),
            text::list(&obj.metadata.finalizers.unwrap_or_default())
        ))),
    }
}

pub(super) async fn running(ctx: &CheckContext<'_>, r: &LogicalRef) -> CheckResult {
    let ns = ctx.names.namespace(
        r.namespace
            .as_deref()
            .map(String::as_str)
            .unwrap_or("default"),
    );
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let pod = existing(&pods, &r.name, || {
        format!("pod {ns}/{} does not exist", *r.name)
    })
    .await?;
    match pod.status.and_then(|s| s.phase) {
        Some(p) if p == "Running" => Ok(format!("pod {ns}/{} is Running", *r.name)),
        other => Err(CheckError::Unmet(format!(
            "pod {ns}/{} phase {}",
            *r.name,
            text::or_none(other.as_deref())
        ))),
    }
}

pub(super) async fn ready(ctx: &CheckContext<'_>, r: &LogicalRef) -> CheckResult {
    let obj = get(ctx, r)
        .await?
        .ok_or_else(|| CheckError::Unmet(format!("{} does not exist", describe(ctx, r))))?;
    let want = obj.data["spec"]["replicas"].as_i64().unwrap_or(1);
    let ready = obj.data["status"]["readyReplicas"].as_i64().unwrap_or(0);
    let generation = obj.metadata.generation.unwrap_or(0);
    let observed = obj.data["status"]["observedGeneration"]
        .as_i64()
        .unwrap_or(0);
    let line = format!(
        "{} has {ready}/{want} replicas ready (generation {generation}, observed {observed})",
        describe(ctx, r)
    );
    verdict(
        obj.metadata.deletion_timestamp.is_none() && observed >= generation && ready >= want,
        line,
    )
}

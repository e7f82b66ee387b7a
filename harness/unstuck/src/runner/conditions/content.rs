//! What is left of a namespace in storage, and whether discovery is whole.

use kube::{
    Api,
    api::{DynamicObject, ListParams},
};
use unstuck_core::scenario::NamespaceRef;

use super::{CheckContext, CheckError, CheckResult, verdict};
use crate::doctor::collect;

pub(super) async fn none_left(ctx: &CheckContext<'_>, r: &NamespaceRef) -> CheckResult {
    let ns = ctx.names.namespace(&r.namespace);
    let discovered = collect::discover(ctx.client)
        .await
        .map_err(CheckError::api("discovery"))?;
    if !discovered.failures.is_empty() {
        return Err(CheckError::Unmet(format!(
            "cannot prove {ns} empty: discovery fails for {}",
            crate::text::list(
                &discovered
                    .failures
                    .iter()
                    .map(|f| &f.group_version)
                    .collect::<Vec<_>>()
            )
        )));
    }
    // Objects of a deleted namespace stay in storage and listable
    // (kubernetes#36891) under the namespace's path, which serves a
    // list whether or not the Namespace object exists. (Not a
    // cluster-wide list with a metadata.namespace field selector:
    // v1.37's podcertificaterequests refuse that field label.)
    let lp = ListParams::default();
    let mut left = Vec::new();
    let namespaced: Vec<_> = discovered.types.iter().filter(|t| t.namespaced).collect();
    for t in &namespaced {
        let api: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &ns, &t.api_resource());
        let items = api
            .list_metadata(&lp)
            .await
            .map_err(CheckError::api(format!("list {}", t.resource)))?
            .items;
        left.extend(
            items
                .into_iter()
                .map(|i| format!("{} {}", t.kind, i.metadata.name.unwrap_or_default())),
        );
    }
    if left.is_empty() {
        Ok(format!(
            "no object of {} namespaced types is left in storage for namespace {ns}",
            namespaced.len()
        ))
    } else {
        Err(CheckError::Unmet(format!(
            "left in storage for namespace {ns}: {}",
            left.join(", ")
        )))
    }
}

pub(super) async fn discovery_complete(ctx: &CheckContext<'_>) -> CheckResult {
    let discovered = collect::discover(ctx.client)
        .await
        .map_err(CheckError::api("discovery"))?;
    let line = if discovered.failures.is_empty() {
        format!(
            "discovery complete: {} listable types, no failing group/version",
            discovered.types.len()
        )
    } else {
        format!(
            "discovery fails for: {}",
            discovered
                .failures
                .iter()
                .map(|f| format!("{} ({})", f.group_version, f.message))
                .collect::<Vec<_>>()
                .join("; ")
        )
    };
    verdict(discovered.failures.is_empty(), line)
}

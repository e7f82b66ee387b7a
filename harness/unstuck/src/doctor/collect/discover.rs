//! Discovery: every served group/version, and the listable types in each.

use std::collections::BTreeSet;

use futures::{StreamExt, stream};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;
use kube::Client;
use unstuck_core::doctor::DiscoveryFailure;

use super::{CONCURRENCY, types::ListableType};

/// Discovery result: the types, and the group/versions that failed.
pub struct Discovered {
    pub types: Vec<ListableType>,
    pub failures: Vec<DiscoveryFailure>,
    /// Each group's preferred group/version (core `v1` included): the
    /// version an object served in several is recorded under.
    pub preferred: BTreeSet<String>,
}

/// Discovers every listable type, preferring nothing: every served
/// version of every group is asked, because a dead aggregated API is
/// exactly one such version. Each group's preferred version is noted,
/// for the object served in several (`crate::doctor::versions`).
pub async fn discover(client: &Client) -> Result<Discovered, kube::Error> {
    let mut versions: Vec<String> = client.list_core_api_versions().await?.versions;
    let mut preferred: BTreeSet<String> = versions.first().cloned().into_iter().collect();
    for g in client.list_api_groups().await?.groups {
        preferred.extend(g.preferred_version.map(|v| v.group_version));
        versions.extend(g.versions.into_iter().map(|v| v.group_version));
    }
    let results: Vec<(String, Result<Vec<APIResource>, kube::Error>)> = stream::iter(versions)
        .map(|gv| {
            let client = client.clone();
            async move {
                let r = if gv.contains('/') {
                    client.list_api_group_resources(&gv).await
                } else {
                    client.list_core_api_resources(&gv).await
                };
                (gv, r.map(|l| l.resources))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut out = Discovered {
        types: Vec::new(),
        failures: Vec::new(),
        preferred,
    };
    for (gv, r) in results {
        match r {
            Ok(resources) => out.types.extend(
                resources
                    .into_iter()
                    .filter(|r| !r.name.contains('/') && r.verbs.iter().any(|v| v == "list"))
                    .map(|r| ListableType {
                        api_version: gv.clone(),
                        kind: r.kind,
                        resource: r.name,
                        namespaced: r.namespaced,
                    }),
            ),
            Err(e) => out.failures.push(DiscoveryFailure {
                group_version: gv,
                message: crate::kube_error::text(&e),
            }),
        }
    }
    out.types
        .sort_by(|a, b| (&a.api_version, &a.resource).cmp(&(&b.api_version, &b.resource)));
    out.failures
        .sort_by(|a, b| a.group_version.cmp(&b.group_version));
    Ok(out)
}

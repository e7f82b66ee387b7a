//! Reading the objects a condition names, in the run's names.

use kube::{
    Api,
    api::{DynamicObject, ListParams},
};
use unstuck_core::scenario::LogicalRef;

use super::{CheckContext, CheckError, real_name, real_namespace};
use crate::runner::objects::{api_for, resolve, resolve_if_served};

/// GETs `name`; a 404 is the condition unmet, saying what is missing
/// (`missing()`).
pub(super) async fn existing<K>(
    api: &Api<K>,
    name: &str,
    missing: impl FnOnce() -> String,
) -> Result<K, CheckError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name)
        .await
        .map_err(CheckError::api(format!("reading {name}")))?
        .ok_or_else(|| CheckError::Unmet(missing()))
}

/// An object looked up without waiting for its type to be served.
pub(super) enum Served<T> {
    /// The API does not serve the type (a custom resource whose CRD is
    /// gone): no object of it can exist. Carries the run's apiVersion.
    No(String),
    /// The type is served.
    Yes(T),
}

/// The run's apiVersion of `r`.
fn api_version(ctx: &CheckContext<'_>, r: &LogicalRef) -> Result<String, CheckError> {
    let written = r.api_version().ok_or_else(|| CheckError::NoApiVersion {
        kind: r.kind.to_string(),
    })?;
    Ok(ctx.names.api_version(written))
}

/// Like [`get`], but a type the API does not serve is an answer, not a
/// wait: `gone` of a custom resource holds once its CRD is gone. (A gate
/// that re-creates the CRD must also check it `Established`, or `gone`
/// would hold before the type is served.)
pub(super) async fn get_if_served(
    ctx: &CheckContext<'_>,
    r: &LogicalRef,
) -> Result<Served<Option<DynamicObject>>, CheckError> {
    match api_if_served(ctx, r).await? {
        Served::No(api_version) => Ok(Served::No(api_version)),
        Served::Yes(api) => {
            let name = real_name(ctx, r);
            api.get_opt(&name)
                .await
                .map(Served::Yes)
                .map_err(CheckError::api(format!("reading {} {name}", *r.kind)))
        }
    }
}

/// The dynamic API of `r`'s type in its real namespace, unless the API
/// does not serve that type now.
async fn api_if_served(
    ctx: &CheckContext<'_>,
    r: &LogicalRef,
) -> Result<Served<Api<DynamicObject>>, CheckError> {
    let api_version = api_version(ctx, r)?;
    let Some((ar, caps)) = resolve_if_served(ctx.client, &api_version, &r.kind).await? else {
        return Ok(Served::No(api_version));
    };
    let ns = real_namespace(ctx, r);
    Ok(Served::Yes(api_for(ctx.client, &ar, &caps, ns.as_deref())))
}

/// The objects of `r`'s kind in its namespace whose names start with its
/// prefix (none when the type is not served).
pub(super) async fn with_prefix(
    ctx: &CheckContext<'_>,
    r: &LogicalRef,
) -> Result<Vec<DynamicObject>, CheckError> {
    let prefix = r.name_prefix().unwrap_or_default();
    let Served::Yes(api) = api_if_served(ctx, r).await? else {
        return Ok(Vec::new());
    };
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(CheckError::api(format!("listing {}", *r.kind)))?;
    Ok(list
        .items
        .into_iter()
        .filter(|o| {
            o.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect())
}

/// GETs the referenced object; `None` when it does not exist.
pub async fn get(
    ctx: &CheckContext<'_>,
    r: &LogicalRef,
) -> Result<Option<DynamicObject>, CheckError> {
    let api_version = api_version(ctx, r)?;
    let (ar, caps) = resolve(ctx.client, &api_version, &r.kind).await?;
    let ns = real_namespace(ctx, r);
    let api = api_for(ctx.client, &ar, &caps, ns.as_deref());
    let name = real_name(ctx, r);
    api.get_opt(&name)
        .await
        .map_err(CheckError::api(format!("reading {} {name}", *r.kind)))
}

//! Reading fixture manifests and resolving kinds to API resources, with the
//! scenario's logical namespaces mapped to the run's real ones.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject},
    discovery::{self, ApiCapabilities, Scope},
};

use crate::wait::{self, Poll, WaitTimeout};

pub use crate::report::NamespaceMap;

/// A fixture file that cannot be read as manifests.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("reading fixture {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing fixture {}: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: Box<serde_saphyr::Error>,
    },
}

/// A kind the API does not serve, or discovery that failed.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The kind was not served within the wait (a CRD that never became
    /// Established, a misspelt kind).
    #[error(transparent)]
    NotServed(#[from] WaitTimeout),
    #[error(
        "discovery of {kind} ({api_version}) failed: {}",
        crate::kube_error::text(source)
    )]
    Discovery {
        api_version: String,
        kind: String,
        source: kube::Error,
    },
}

/// Reads every document of a manifest file.
pub fn read_manifests(path: &Path) -> Result<Vec<serde_json::Value>, FixtureError> {
    let text = std::fs::read_to_string(path).map_err(|source| FixtureError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|source| FixtureError::Parse {
            path: path.to_path_buf(),
            source: Box::new(source),
        })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Resolves `apiVersion` + `kind` to its resource, retrying for a while:
/// a kind whose CRD was applied a moment ago is not served until the CRD
/// is Established.
pub async fn resolve(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Result<(ApiResource, ApiCapabilities), ResolveError> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.to_string()),
    };
    let gvk = kube::api::GroupVersionKind::gvk(&group, &version, kind);
    wait::until(
        format!("the API to serve {kind} ({api_version})"),
        Duration::from_secs(30),
        Duration::from_millis(300),
        || {
            let (client, gvk) = (client.clone(), gvk.clone());
            async move {
                match discovery::pinned_kind(&client, &gvk).await {
                    Ok(found) => Poll::Ready(found),
                    Err(e) => Poll::Pending(e.to_string()),
                }
            }
        },
    )
    .await
    .map_err(ResolveError::from)
}

/// The type, if the API serves it now: `Ok(None)` when its group or
/// version is not served (404) or lacks the kind — a custom resource whose
/// CRD is gone — and `Err` for anything else (retry). No waiting, unlike
/// [`resolve`], which gives a just-created CRD time to be served: cleanup
/// uses this, where a type that is no longer served means its objects are
/// gone too.
pub async fn resolve_if_served(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Result<Option<(ApiResource, ApiCapabilities)>, ResolveError> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    match discovery::pinned_kind(client, &gvk).await {
        Ok(found) => Ok(Some(found)),
        // A removed group answers with a plain-text 404 page, which kube
        // reports with a reason other than NotFound: the code decides.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        // The group or version answers without this kind (or at all): a
        // CRD being removed passes through these.
        Err(kube::Error::Discovery(_)) => Ok(None),
        Err(source) => Err(ResolveError::Discovery {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            source,
        }),
    }
}

/// An API handle for an object of resolved type in the right scope.
pub fn api_for(
    client: &Client,
    ar: &ApiResource,
    caps: &ApiCapabilities,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match (caps.scope.clone(), namespace) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, ar),
        _ => Api::all_with(client.clone(), ar),
    }
}

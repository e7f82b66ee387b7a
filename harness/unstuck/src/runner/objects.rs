//! Reading fixture manifests and resolving kinds to API resources, with the
//! scenario's logical namespaces mapped to the run's real ones.

use std::{collections::BTreeMap, path::Path, time::Duration};

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject},
    discovery::{self, ApiCapabilities, Scope},
};

use crate::wait::{self, Poll};

/// Logical namespace names of a scenario mapped to this run's namespaces.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct NamespaceMap {
    map: BTreeMap<String, String>,
}

impl NamespaceMap {
    /// Maps each logical name to `<logical>-<run id>` (63 characters at most).
    pub fn new<'a>(logical: impl IntoIterator<Item = &'a str>, run_id: &str) -> Self {
        let map = logical
            .into_iter()
            .map(|l| {
                let keep = 62usize.saturating_sub(run_id.len()).min(l.len());
                (l.to_string(), format!("{}-{run_id}", &l[..keep]))
            })
            .collect();
        Self { map }
    }

    /// The real namespace for a logical name. Loading guarantees every name
    /// used is declared; an undeclared one is passed through unchanged.
    pub fn real(&self, logical: &str) -> String {
        self.map
            .get(logical)
            .cloned()
            .unwrap_or_else(|| logical.to_string())
    }

    pub fn real_names(&self) -> Vec<String> {
        self.map.values().cloned().collect()
    }
}

/// Reads every document of a manifest file.
pub fn read_manifests(path: &Path) -> Result<Vec<serde_json::Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("reading fixture {}: {e}", path.display()))?;
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
        .map_err(|e| format!("parsing fixture {}: {e}", path.display()))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Resolves `apiVersion` + `kind` to its resource, retrying for a while:
/// a kind whose CRD was applied a moment ago is not served until the CRD
/// is Established.
pub async fn resolve(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Result<(ApiResource, ApiCapabilities), String> {
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
    .map_err(|e| e.to_string())
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
) -> Result<Option<(ApiResource, ApiCapabilities)>, String> {
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
        Err(e) => Err(e.to_string()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_names_map_to_unique_bounded_names() {
        let m = NamespaceMap::new(["app", &"x".repeat(70)], "k3x9q2");
        assert_eq!(m.real("app"), "app-k3x9q2");
        assert!(m.real(&"x".repeat(70)).len() <= 63);
        assert_eq!(m.real_names().len(), 2);
    }
}

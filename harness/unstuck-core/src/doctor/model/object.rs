//! Objects as the doctor names them: an [`ObjectRef`] says which object a
//! finding is about; an [`ObjectRecord`] is one object as a metadata-only
//! LIST returned it, with where it lives in the API.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Which object a finding is about.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `v1` or `group/version`.
    pub api_version: String,
    /// e.g. `ConfigMap`.
    pub kind: String,
    /// Namespace, `None` when cluster-scoped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// UID, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl ObjectRef {
    /// The pod with this metadata.
    pub fn pod(meta: &ObjectMeta) -> Self {
        ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} ", self.api_version, self.kind)?;
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}/")?;
        }
        f.write_str(&self.name)
    }
}

/// One object, seen through the metadata-only API (what a
/// `PartialObjectMetadata` LIST returns), plus where it lives in the API.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRecord {
    /// `v1` for the core group, else `group/version`.
    pub api_version: String,
    /// The kind, e.g. `ConfigMap`.
    pub kind: String,
    /// The plural resource name used in API paths, e.g. `configmaps`.
    pub resource: String,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
    /// The object's metadata as the API returned it.
    pub metadata: ObjectMeta,
}

impl ObjectRecord {
    /// A Namespace as a record: its own `metadata.finalizers` are judged
    /// like any object's.
    pub fn of_namespace(ns: &Namespace) -> Self {
        ObjectRecord {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            resource: "namespaces".into(),
            namespaced: false,
            metadata: ns.metadata.clone(),
        }
    }

    /// The API group (`""` for core).
    pub fn group(&self) -> &str {
        split_api_version(&self.api_version).0
    }

    /// The API version within the group.
    pub fn version(&self) -> &str {
        split_api_version(&self.api_version).1
    }

    /// `metadata.name` (empty if absent).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// `metadata.namespace`, only for namespaced objects.
    pub fn namespace(&self) -> Option<&str> {
        if self.namespaced {
            self.metadata.namespace.as_deref()
        } else {
            None
        }
    }

    /// `metadata.finalizers` (empty if absent).
    pub fn finalizers(&self) -> &[String] {
        self.metadata.finalizers.as_deref().unwrap_or_default()
    }

    /// `metadata.deletionTimestamp`, if set.
    pub fn deletion_timestamp(&self) -> Option<Timestamp> {
        self.metadata.deletion_timestamp.as_ref().map(|t| t.0)
    }
}

/// Splits `group/version` (or core `v1`) into its parts.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// A finding's subject for namespace `ns`.
pub(crate) fn namespace_ref(ns: &Namespace) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: None,
        name: ns.metadata.name.clone().unwrap_or_default(),
        uid: ns.metadata.uid.clone(),
    }
}

/// `namespace/name` of an object's metadata, or just `name` when
/// cluster-scoped; used in evidence lines.
pub fn display_name(meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or("<unnamed>");
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

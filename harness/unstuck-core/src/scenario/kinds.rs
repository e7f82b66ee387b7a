//! The well-known kinds a scenario may name without an `apiVersion`.
//!
//! `kubectl` lets people write `kubectl delete cm mymap` because discovery
//! tells it what `cm` is. A scenario is checked before any cluster exists,
//! so there is no discovery to ask; this small table stands in for it. Any
//! other kind (custom resources above all) must carry its `apiVersion`,
//! because guessing a group is how a test ends up deleting the wrong thing.

/// Kind, apiVersion, and whether objects of the kind live in a namespace.
const WELL_KNOWN: &[(&str, &str, bool)] = &[
    ("ConfigMap", "v1", true),
    ("Secret", "v1", true),
    ("Pod", "v1", true),
    ("Service", "v1", true),
    ("Namespace", "v1", false),
    ("PersistentVolumeClaim", "v1", true),
    ("PersistentVolume", "v1", false),
    ("ServiceAccount", "v1", true),
    ("Endpoints", "v1", true),
    ("Deployment", "apps/v1", true),
    ("StatefulSet", "apps/v1", true),
    ("DaemonSet", "apps/v1", true),
    ("ReplicaSet", "apps/v1", true),
    ("APIService", "apiregistration.k8s.io/v1", false),
    ("CustomResourceDefinition", "apiextensions.k8s.io/v1", false),
    ("Lease", "coordination.k8s.io/v1", true),
];

/// The `apiVersion` to assume for a well-known `kind` written without one,
/// or `None` when the kind is not well known and must say its apiVersion.
///
/// ```
/// use unstuck_core::scenario::default_api_version;
/// assert_eq!(default_api_version("ConfigMap"), Some("v1"));
/// assert_eq!(default_api_version("Deployment"), Some("apps/v1"));
/// assert_eq!(default_api_version("Widget"), None);
/// ```
pub fn default_api_version(kind: &str) -> Option<&'static str> {
    WELL_KNOWN
        .iter()
        .find(|(k, _, _)| *k == kind)
        .map(|(_, api_version, _)| *api_version)
}

/// Whether objects of a well-known `kind` live in a namespace; `None` for
/// kinds this table does not know (their scope is only known to the cluster).
pub fn is_namespaced(kind: &str) -> Option<bool> {
    WELL_KNOWN
        .iter()
        .find(|(k, _, _)| *k == kind)
        .map(|(_, _, namespaced)| *namespaced)
}

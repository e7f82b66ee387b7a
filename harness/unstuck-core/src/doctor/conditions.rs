//! Reading the namespace controller's and the aggregator's status
//! conditions, exactly as Kubernetes writes them.
//!
//! Formats (kubernetes/kubernetes
//! `pkg/controller/namespace/deletion/status_condition_utils.go`):
//! - `NamespaceContentRemaining` / `SomeResourcesRemain`:
//!   `Some resources are remaining: <resource>.<group> has <n> resource instances, ...`
//!   (sorted; the core group renders as `pods.`).
//! - `NamespaceFinalizersRemaining` / `SomeFinalizersRemain` (older:
//!   `SomeFinalizerRemain`): `Some content in the namespace has finalizers
//!   remaining: <finalizer> in <n> resource instances, ...` (older: `Some
//!   finalizers are remaining: ...`).
//! - `NamespaceDeletionDiscoveryFailure` / `DiscoveryFailed`: `Discovery
//!   failed for some groups, <n> failing: unable to retrieve the complete
//!   list of server APIs: <group/version>: <err>, ...` (client-go
//!   `ErrGroupDiscoveryFailed`, entries sorted), or any other error text.
//!
//! A condition reports a failure when its status is `True`; on success the
//! controller writes the same type with status `False` and an OK reason.

use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
    APIService, APIServiceCondition,
};

pub use super::model::namespace::{FinalizerCount, ResourceCount};
use crate::text::quoted;

/// Condition type: discovery failed during namespace deletion.
pub const NS_DISCOVERY_FAILURE: &str = "NamespaceDeletionDiscoveryFailure";
/// Condition type: legacy group/versions could not be parsed.
pub const NS_GV_PARSING_FAILURE: &str = "NamespaceDeletionGroupVersionParsingFailure";
/// Condition type: deleting some content failed.
pub const NS_CONTENT_FAILURE: &str = "NamespaceDeletionContentFailure";
/// Condition type: some content is still present.
pub const NS_CONTENT_REMAINING: &str = "NamespaceContentRemaining";
/// Condition type: some content still carries finalizers.
pub const NS_FINALIZERS_REMAINING: &str = "NamespaceFinalizersRemaining";

const CONTENT_PREFIX: &str = "Some resources are remaining: ";
const FINALIZERS_PREFIXES: [&str; 2] = [
    "Some content in the namespace has finalizers remaining: ",
    "Some finalizers are remaining: ",
];
const DISCOVERY_PREFIX: &str = "unable to retrieve the complete list of server APIs: ";

/// Parses a `NamespaceContentRemaining` message into resource counts.
/// Entries that do not have the controller's shape are skipped.
pub fn parse_content_remaining(message: &str) -> Vec<ResourceCount> {
    let Some(rest) = message.strip_prefix(CONTENT_PREFIX) else {
        return Vec::new();
    };
    rest.split(", ")
        .filter_map(|entry| {
            let (qualified, count) = entry.trim().split_once(" has ")?;
            let count = count.strip_suffix(" resource instances")?.parse().ok()?;
            let (resource, group) = match qualified.split_once('.') {
                Some((resource, group)) => (resource, group),
                None => (qualified, ""),
            };
            (!resource.is_empty()).then(|| ResourceCount {
                resource: resource.to_owned(),
                group: group.to_owned(),
                count,
            })
        })
        .collect()
}

/// Parses a `NamespaceFinalizersRemaining` message into finalizer counts.
pub fn parse_finalizers_remaining(message: &str) -> Vec<FinalizerCount> {
    let Some(rest) = FINALIZERS_PREFIXES
        .iter()
        .find_map(|p| message.strip_prefix(p))
    else {
        return Vec::new();
    };
    rest.split(", ")
        .filter_map(|entry| {
            let (finalizer, count) = entry.trim().rsplit_once(" in ")?;
            let count = count.strip_suffix(" resource instances")?.parse().ok()?;
            (!finalizer.is_empty() && !finalizer.contains(' ')).then(|| FinalizerCount {
                finalizer: finalizer.to_owned(),
                count,
            })
        })
        .collect()
}

/// Parses the group/versions named in a `NamespaceDeletionDiscoveryFailure`
/// message (or any client-go `ErrGroupDiscoveryFailed` text): sorted,
/// without duplicates. Entries are `<group/version>: <error>` separated by
/// `, `; pieces of error text that themselves contain `, ` are skipped
/// because they do not start with a valid group/version.
pub fn parse_discovery_failure(message: &str) -> Vec<String> {
    let rest = match message.find(DISCOVERY_PREFIX) {
        Some(at) => &message[at + DISCOVERY_PREFIX.len()..],
        None => message,
    };
    let mut gvs: Vec<String> = rest
        .split(", ")
        .filter_map(|piece| piece.split_once(": ").map(|(gv, _)| gv.trim()))
        .filter(|gv| is_group_version(gv))
        .map(str::to_owned)
        .collect();
    gvs.sort();
    gvs.dedup();
    gvs
}

/// Whether `s` looks like `group/version` (or the core `v1`-style
/// version): a version is `v` + digit + lowercase alphanumerics; a group is
/// lowercase alphanumerics, `.` and `-`.
pub fn is_group_version(s: &str) -> bool {
    let (group, version) = match s.split_once('/') {
        Some((g, v)) => (Some(g), v),
        None => (None, s),
    };
    let version_ok = version.len() >= 2
        && version.starts_with('v')
        && version.as_bytes()[1].is_ascii_digit()
        && version
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let group_ok = group.is_none_or(|g| {
        !g.is_empty()
            && g.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
    });
    version_ok && group_ok
}

/// The APIService that serves a group/version: `metrics.k8s.io/v1beta1` ->
/// `v1beta1.metrics.k8s.io`; the core `v1` -> `v1.` (a local registration).
pub fn api_service_name(group_version: &str) -> String {
    match group_version.split_once('/') {
        Some((group, version)) => format!("{version}.{group}"),
        None => format!("{group_version}."),
    }
}

/// The namespace condition of type `type_`, if present.
pub fn namespace_condition<'a>(ns: &'a Namespace, type_: &str) -> Option<&'a NamespaceCondition> {
    ns.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The namespace condition of type `type_` when it reports a failure
/// (status `True`).
pub fn failing_namespace_condition<'a>(
    ns: &'a Namespace,
    type_: &str,
) -> Option<&'a NamespaceCondition> {
    namespace_condition(ns, type_).filter(|c| c.status == "True")
}

/// The APIService's `Available` condition, if present.
pub fn api_service_available(api: &APIService) -> Option<&APIServiceCondition> {
    api.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Available")
}

/// One line quoting a namespace condition, for evidence.
pub fn quote_namespace_condition(c: &NamespaceCondition) -> String {
    format!(
        "condition {}={} reason={}: {}",
        c.type_,
        c.status,
        c.reason.as_deref().unwrap_or("<none>"),
        quoted(c.message.as_deref().unwrap_or(""))
    )
}

/// One line quoting an APIService condition, for evidence.
pub fn quote_api_service_condition(name: &str, c: &APIServiceCondition) -> String {
    format!(
        "APIService {name} condition {}={} reason={}: {}",
        c.type_,
        c.status,
        c.reason.as_deref().unwrap_or("<none>"),
        quoted(c.message.as_deref().unwrap_or(""))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_remaining_core_and_groups() {
        let got = parse_content_remaining(
            "Some resources are remaining: pods. has 2 resource instances, widgets.example.com has 1 resource instances",
        );
        assert_eq!(
            got,
            vec![
                ResourceCount {
                    resource: "pods".into(),
                    group: "".into(),
                    count: 2
                },
                ResourceCount {
                    resource: "widgets".into(),
                    group: "example.com".into(),
                    count: 1
                },
            ]
        );
        assert_eq!(got[0].qualified(), "pods");
        assert_eq!(got[1].qualified(), "widgets.example.com");
        assert!(parse_content_remaining("All content successfully removed").is_empty());
    }

    #[test]
    fn finalizers_remaining_both_wordings() {
        let want = vec![
            FinalizerCount {
                finalizer: "example.com/finalizer".into(),
                count: 1,
            },
            FinalizerCount {
                finalizer: "kiali.io/finalizer".into(),
                count: 3,
            },
        ];
        assert_eq!(
            parse_finalizers_remaining(
                "Some content in the namespace has finalizers remaining: example.com/finalizer in 1 resource instances, kiali.io/finalizer in 3 resource instances"
            ),
            want
        );
        assert_eq!(
            parse_finalizers_remaining(
                "Some finalizers are remaining: example.com/finalizer in 1 resource instances, kiali.io/finalizer in 3 resource instances"
            ),
            want
        );
    }

    #[test]
    fn discovery_failure_forms() {
        assert_eq!(
            parse_discovery_failure(
                "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: stale GroupVersion discovery: metrics.k8s.io/v1beta1"
            ),
            vec!["metrics.k8s.io/v1beta1"]
        );
        assert_eq!(
            parse_discovery_failure(
                "Discovery failed for some groups, 2 failing: unable to retrieve the complete list of server APIs: admission.cluster.open-cluster-management.io/v1: the server is currently unable to handle the request, admission.work.open-cluster-management.io/v1: the server is currently unable to handle the request"
            ),
            vec![
                "admission.cluster.open-cluster-management.io/v1",
                "admission.work.open-cluster-management.io/v1"
            ]
        );
        assert_eq!(
            parse_discovery_failure(
                "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: an error on the server (\"Internal Server Error: \\\"/apis/metrics.k8s.io/v1beta1\\\": the server could not find the requested resource\") has prevented the request from succeeding"
            ),
            vec!["metrics.k8s.io/v1beta1"]
        );
        assert_eq!(
            api_service_name("metrics.k8s.io/v1beta1"),
            "v1beta1.metrics.k8s.io"
        );
        assert_eq!(api_service_name("v1"), "v1.");
    }
}

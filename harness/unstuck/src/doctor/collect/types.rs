//! A type the doctor lists, as discovery found it: what the pager
//! ([`crate::doctor::pages`]) and the collector both take.

use kube::api::ApiResource;

/// One listable resource type found by discovery.
#[derive(Clone, Debug)]
pub struct ListableType {
    pub api_version: String,
    pub kind: String,
    pub resource: String,
    pub namespaced: bool,
}

impl ListableType {
    pub fn api_resource(&self) -> ApiResource {
        api_resource(&self.api_version, &self.kind, &self.resource)
    }
}

/// The dynamic-API description of a type known by apiVersion, kind and
/// plural resource name (`v1` is the core group).
pub fn api_resource(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        plural: plural.to_string(),
    }
}

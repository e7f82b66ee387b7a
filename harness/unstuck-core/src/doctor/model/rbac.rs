//! The cluster's RBAC objects, as the collector listed them. Who they let
//! update an object is evaluated in [`crate::doctor::owner::rbac`].

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde::{Deserialize, Serialize};

/// The cluster's RBAC objects, as the collector listed them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rbac {
    /// Every Role.
    #[serde(default)]
    pub roles: Vec<Role>,
    /// Every ClusterRole.
    #[serde(default)]
    pub cluster_roles: Vec<ClusterRole>,
    /// Every RoleBinding.
    #[serde(default)]
    pub role_bindings: Vec<RoleBinding>,
    /// Every ClusterRoleBinding.
    #[serde(default)]
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
}

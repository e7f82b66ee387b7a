//! The object and pod references that steps, conditions and faults share:
//! small types at the bottom of the scenario model, which import none of
//! the files that use them.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::kinds::default_api_version;
use super::located::Located;

/// A reference to one Kubernetes object in a scenario file, by kind and
/// name, with *logical* namespace names (hence the name: not the doctor's
/// `ObjectRef`, which names a real object).
///
/// `namespace` and, for `kind: Namespace`, `name` are *logical* namespace
/// names from `Scenario::namespaces`; the runner maps them to the real
/// namespaces of the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogicalRef {
    /// `group/version` (or `v1` for the core group). May be left out for
    /// the well-known kinds of [`default_api_version`](super::default_api_version);
    /// the loader fills it in, so it is always `Some` in a loaded scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// The object's kind, such as `ConfigMap`.
    pub kind: Located<String>,
    /// The object's name (a logical namespace name for `kind: Namespace`).
    pub name: Located<String>,
    /// Logical namespace, for namespaced kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Located<String>>,
}

impl LogicalRef {
    /// For a name written as a prefix pattern (`cron-job-dashmail-*`, for
    /// objects whose names a controller generates), the prefix. Only
    /// `terminating` and `gone` take one: some object whose name starts
    /// with it is Terminating; no object whose name starts with it exists.
    pub fn name_prefix(&self) -> Option<&str> {
        self.name.strip_suffix('*')
    }

    /// The explicit apiVersion, or the well-known default for the kind.
    pub fn api_version(&self) -> Option<&str> {
        self.api_version
            .as_deref()
            .or_else(|| default_api_version(&self.kind))
    }
}

impl fmt::Display for LogicalRef {
    /// `ConfigMap app/mymap`, or `Namespace app` for cluster-scoped objects.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// A pod, by logical namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodRef {
    /// The pod's name.
    pub pod: Located<String>,
    /// Its logical namespace.
    pub namespace: Located<String>,
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.pod)
    }
}

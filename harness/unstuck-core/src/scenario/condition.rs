//! The conditions an `expect` step waits for, as Rust types: what a
//! gate checks on the cluster (objects Terminating or gone, status
//! conditions of namespaces, APIServices, nodes and any object, kubelet
//! log lines, events). Strict like the rest of the format: unknown keys
//! are errors, and a condition's status is the API's quoted string.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use super::located::Located;
use super::refs::LogicalRef;
use crate::text::quoted;

/// One thing an `expect` step waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Condition {
    /// The object exists and has a `deletionTimestamp`. A name ending in
    /// `*` is a prefix: some object of that kind whose name starts with
    /// it is Terminating.
    Terminating(LogicalRef),
    /// The object no longer exists. A name ending in `*` is a prefix: no
    /// object of that kind whose name starts with it exists.
    Gone(LogicalRef),
    /// The pod is in phase Running and not being deleted. Pods only.
    Running(LogicalRef),
    /// The workload has all its replicas ready (`status.readyReplicas` at
    /// least `spec.replicas`, for the current generation). Deployments,
    /// ReplicaSets and StatefulSets only.
    Ready(LogicalRef),
    /// A namespace status condition has the given status (and reason,
    /// message), as the namespace controller reports it while deleting.
    NamespaceCondition(NamespaceConditionCheck),
    /// An APIService status condition has the given status.
    ApiServiceCondition(ApiServiceConditionCheck),
    /// A status condition of any object (`status.conditions`): a CRD's
    /// `Terminating`, a Job's `Complete`, a custom resource's `Ready`.
    Condition(ObjectConditionCheck),
    /// A status condition of the node a pod runs on has the given status
    /// (`Ready=Unknown` once the node lifecycle controller stops hearing
    /// from its kubelet).
    NodeCondition(NodeConditionCheck),
    /// Nothing that lived in the namespace is left in storage: a namespace
    /// of the same name, re-created, would be empty. The proof that forcing
    /// a namespace away did not orphan its content.
    NoContentLeft(NamespaceRef),
    /// API discovery succeeds for every group and version (no aggregated
    /// API is unavailable).
    DiscoveryComplete {},
    /// A kubelet's log contains a line.
    KubeletLog(KubeletLogCheck),
    /// An event matching all the given fields exists.
    Event(EventCheck),
}

impl Condition {
    /// The condition's name as written in the file.
    pub fn kind(&self) -> &'static str {
        match self {
            Condition::Terminating(_) => "terminating",
            Condition::Gone(_) => "gone",
            Condition::Running(_) => "running",
            Condition::Ready(_) => "ready",
            Condition::NamespaceCondition(_) => "namespaceCondition",
            Condition::ApiServiceCondition(_) => "apiServiceCondition",
            Condition::Condition(_) => "condition",
            Condition::NodeCondition(_) => "nodeCondition",
            Condition::NoContentLeft(_) => "noContentLeft",
            Condition::DiscoveryComplete {} => "discoveryComplete",
            Condition::KubeletLog(_) => "kubeletLog",
            Condition::Event(_) => "event",
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::Terminating(object) => write!(f, "{object} is Terminating"),
            Condition::Gone(object) => write!(f, "{object} is gone"),
            Condition::Running(object) => write!(f, "{object} is Running"),
            Condition::Ready(object) => write!(f, "{object} has all replicas ready"),
            Condition::NamespaceCondition(check) => check.fmt(f),
            Condition::ApiServiceCondition(check) => check.fmt(f),
            Condition::Condition(check) => check.fmt(f),
            Condition::NodeCondition(check) => check.fmt(f),
            Condition::NoContentLeft(ns) => {
                write!(
                    f,
                    "nothing from namespace {} is left in storage",
                    ns.namespace
                )
            }
            Condition::DiscoveryComplete {} => f.write_str("API discovery is complete"),
            Condition::KubeletLog(check) => check.fmt(f),
            Condition::Event(check) => check.fmt(f),
        }
    }
}

/// Writes a status condition check as `<subject> has Type=Status`, then
/// ` (reason R, message contains "M")` for its optional parts.
fn fmt_condition_check(
    f: &mut fmt::Formatter<'_>,
    subject: fmt::Arguments<'_>,
    condition_type: &str,
    status: ConditionStatus,
    reason: Option<&str>,
    message: Option<&str>,
) -> fmt::Result {
    write!(f, "{subject} has {condition_type}={status}")?;
    match (reason, message) {
        (None, None) => Ok(()),
        (Some(r), None) => write!(f, " (reason {r})"),
        (None, Some(m)) => write!(f, " (message contains {m})", m = quoted(m)),
        (Some(r), Some(m)) => write!(f, " (reason {r}, message contains {m})", m = quoted(m)),
    }
}

/// The namespace status condition types the namespace controller sets
/// (`k8s.io/api/core/v1` `NamespaceConditionType`). A misspelled type
/// would never match, so anything else is rejected when loading.
pub const NAMESPACE_CONDITION_TYPES: &[&str] = &[
    "NamespaceDeletionDiscoveryFailure",
    "NamespaceDeletionGroupVersionParsingFailure",
    "NamespaceDeletionContentFailure",
    "NamespaceContentRemaining",
    "NamespaceFinalizersRemaining",
];

/// The node status condition types the kubelet and the node lifecycle
/// controller set (`k8s.io/api/core/v1` `NodeConditionType`).
pub const NODE_CONDITION_TYPES: &[&str] = &[
    "Ready",
    "MemoryPressure",
    "DiskPressure",
    "PIDPressure",
    "NetworkUnavailable",
];

/// Checks one status condition of the node a pod is bound to (node names
/// differ per cluster, so the node is named through the pod).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeConditionCheck {
    /// The pod whose node to look at.
    pub pod: Located<String>,
    /// Logical namespace of the pod.
    pub namespace: Located<String>,
    /// Condition type, one of `NODE_CONDITION_TYPES`.
    #[serde(rename = "type")]
    pub condition_type: Located<String>,
    /// Required status.
    pub status: ConditionStatus,
    /// Required reason, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Text the condition's message must contain, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_contains: Option<Located<String>>,
}

impl fmt::Display for NodeConditionCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_condition_check(
            f,
            format_args!("the node of pod {}/{}", self.namespace, self.pod),
            &self.condition_type,
            self.status,
            self.reason.as_deref(),
            self.message_contains.as_ref().map(|m| m.as_str()),
        )
    }
}

/// The APIService status condition types (`apiregistration/v1`).
pub const API_SERVICE_CONDITION_TYPES: &[&str] = &["Available"];

/// Checks one status condition of a (logical) namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceConditionCheck {
    /// Logical namespace.
    pub namespace: Located<String>,
    /// Condition type, one of [`NAMESPACE_CONDITION_TYPES`].
    #[serde(rename = "type")]
    pub condition_type: Located<String>,
    /// Required status.
    pub status: ConditionStatus,
    /// Required reason, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Text the condition's message must contain, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_contains: Option<Located<String>>,
}

impl fmt::Display for NamespaceConditionCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_condition_check(
            f,
            format_args!("namespace {}", self.namespace),
            &self.condition_type,
            self.status,
            self.reason.as_deref(),
            self.message_contains.as_ref().map(|m| m.as_str()),
        )
    }
}

/// Checks one status condition of an APIService (cluster-scoped, so the
/// name is the real one, such as `v1beta1.metrics.k8s.io`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiServiceConditionCheck {
    /// APIService name, `version.group`.
    pub name: Located<String>,
    /// Condition type, one of [`API_SERVICE_CONDITION_TYPES`].
    #[serde(rename = "type")]
    pub condition_type: Located<String>,
    /// Required status.
    pub status: ConditionStatus,
    /// Required reason, if any (`ServiceNotFound`, `MissingEndpoints`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Text the condition's message must contain, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_contains: Option<Located<String>>,
}

impl fmt::Display for ApiServiceConditionCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_condition_check(
            f,
            format_args!("APIService {}", self.name),
            &self.condition_type,
            self.status,
            self.reason.as_deref(),
            self.message_contains.as_ref().map(|m| m.as_str()),
        )
    }
}

/// Checks one status condition of any object, named as an [`LogicalRef`]
/// is (`kind`, `name`, `namespace`, `apiVersion` where the kind is not
/// well known), plus the condition as in the other checks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectConditionCheck {
    /// As in [`LogicalRef::api_version`]; the loader fills it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// The object's kind.
    pub kind: Located<String>,
    /// The object's name.
    pub name: Located<String>,
    /// Logical namespace, for namespaced kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Located<String>>,
    /// Condition type, as the object's controller writes it.
    #[serde(rename = "type")]
    pub condition_type: Located<String>,
    /// Required status.
    pub status: ConditionStatus,
    /// Required reason, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Text the condition's message must contain, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_contains: Option<Located<String>>,
}

impl ObjectConditionCheck {
    /// The object the condition is on.
    pub fn object(&self) -> LogicalRef {
        LogicalRef {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
        }
    }
}

impl fmt::Display for ObjectConditionCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_condition_check(
            f,
            format_args!("{}", self.object()),
            &self.condition_type,
            self.status,
            self.reason.as_deref(),
            self.message_contains.as_ref().map(|m| m.as_str()),
        )
    }
}

/// The status of a Kubernetes status condition.
///
/// Written as a quoted string, exactly as in the API: `status: "True"`.
/// YAML reads an unquoted `True` as a boolean, and a boolean here is
/// rejected rather than converted, so the file says what the API says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// `"True"`
    True,
    /// `"False"`
    False,
    /// `"Unknown"`
    Unknown,
}

impl ConditionStatus {
    /// The status as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ConditionStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ConditionStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StatusVisitor;

        impl de::Visitor<'_> for StatusVisitor {
            type Value = ConditionStatus;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a quoted condition status: "True", "False" or "Unknown""#)
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ConditionStatus, E> {
                match v {
                    "True" => Ok(ConditionStatus::True),
                    "False" => Ok(ConditionStatus::False),
                    "Unknown" => Ok(ConditionStatus::Unknown),
                    other => Err(E::custom(format_args!(
                        r#"invalid condition status {other}: expected "True", "False" or "Unknown" (capitalised, as the API writes it)"#,
                        other = quoted(other)
                    ))),
                }
            }

            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ConditionStatus, E> {
                let quoted = if v { "True" } else { "False" };
                Err(E::custom(format_args!(
                    r#"condition status is the boolean {v}, but the API uses strings: quote it, as in status: "{quoted}""#
                )))
            }
        }

        // `deserialize_any` rather than `deserialize_str`: a YAML string
        // target would quietly accept an unquoted `True` as text, and the
        // point is to tell the writer that YAML saw a boolean there.
        deserializer.deserialize_any(StatusVisitor)
    }
}

/// A logical namespace, for conditions about a whole namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceRef {
    /// Logical namespace.
    pub namespace: Located<String>,
}

/// Looks for a line in a kubelet's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeletLogCheck {
    /// Text a log line must contain.
    pub contains: Located<String>,
    /// Read the log of the node this pod runs (or ran) on; every node's
    /// kubelet log when left out. Needs `namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Located<String>>,
    /// Logical namespace of `pod`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Located<String>>,
}

impl fmt::Display for KubeletLogCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.pod, &self.namespace) {
            (Some(pod), Some(ns)) => write!(f, "kubelet log of the node of pod {ns}/{pod}")?,
            (Some(pod), None) => write!(f, "kubelet log of the node of pod {pod}")?,
            (None, _) => f.write_str("a kubelet log")?,
        }
        write!(f, " contains {}", quoted(self.contains.as_str()))
    }
}

/// Looks for an event. Every field given must match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventCheck {
    /// Logical namespace the event is recorded in.
    pub namespace: Located<String>,
    /// Kind of the involved object (`Pod`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involved_kind: Option<String>,
    /// Name of the involved object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involved_name: Option<String>,
    /// The event's reason (`FailedKillPod`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Text the event's message must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_contains: Option<Located<String>>,
}

impl fmt::Display for EventCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event")?;
        if let Some(reason) = &self.reason {
            write!(f, " {reason}")?;
        }
        match (&self.involved_kind, &self.involved_name) {
            (Some(kind), Some(name)) => write!(f, " for {kind} {}/{name}", self.namespace)?,
            (None, Some(name)) => write!(f, " for {}/{name}", self.namespace)?,
            (Some(kind), None) => write!(f, " for a {kind} in namespace {}", self.namespace)?,
            (None, None) => write!(f, " in namespace {}", self.namespace)?,
        }
        if let Some(message) = &self.message_contains {
            write!(f, " with message containing {}", quoted(message.as_str()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_condition_checks_print_subject_type_status_and_optional_parts() {
        let ns = |reason: Option<&str>, message: Option<&str>| {
            NamespaceConditionCheck {
                namespace: String::from("app").into(),
                condition_type: String::from("NamespaceContentRemaining").into(),
                status: ConditionStatus::True,
                reason: reason.map(String::from),
                message_contains: message.map(|m| String::from(m).into()),
            }
            .to_string()
        };
        assert_eq!(
            ns(None, None),
            "namespace app has NamespaceContentRemaining=True"
        );
        assert_eq!(
            ns(Some("R"), None),
            "namespace app has NamespaceContentRemaining=True (reason R)"
        );
        assert_eq!(
            ns(None, Some("m")),
            "namespace app has NamespaceContentRemaining=True (message contains \"m\")"
        );
        assert_eq!(
            ns(Some("R"), Some("m")),
            "namespace app has NamespaceContentRemaining=True (reason R, message contains \"m\")"
        );
        let api = ApiServiceConditionCheck {
            name: String::from("v1beta1.metrics.k8s.io").into(),
            condition_type: String::from("Available").into(),
            status: ConditionStatus::False,
            reason: Some("ServiceNotFound".into()),
            message_contains: Some(String::from("not present").into()),
        };
        assert_eq!(
            api.to_string(),
            "APIService v1beta1.metrics.k8s.io has Available=False \
             (reason ServiceNotFound, message contains \"not present\")"
        );
    }
}

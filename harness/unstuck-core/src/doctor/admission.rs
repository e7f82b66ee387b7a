//! Which admission webhooks a write goes through: the apiserver's own
//! matching, evaluated on the snapshot, so that the doctor knows before it
//! writes whether a webhook that fails closed will reject the write.
//!
//! Follows `k8s.io/apiserver/pkg/admission/plugin/webhook/predicates`
//! (v1.34): a rule matches when its operations, apiGroups, apiVersions,
//! resources (with `res/sub`, `*/sub`, `res/*`, `*/*`; a bare `*` is main
//! resources only) and scope all match; then the namespaceSelector (on
//! the namespace's labels, or a Namespace's own labels; skipped for other
//! cluster-scoped objects) and the objectSelector (on the object's
//! labels) must match. What the snapshot cannot evaluate is taken as a
//! match and said: `matchConditions` (CEL), a namespace whose labels were
//! not read, and `matchPolicy: Equivalent` on another version of the same
//! resource. That is the conservative side for a doctor: it may name a
//! webhook that would have let the write through, never miss one that
//! rejects it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::model::{Snapshot, WebhookView, split_api_version};

/// A write the doctor (or a controller) would make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write<'a> {
    /// `UPDATE`, `DELETE`, ...
    pub operation: &'a str,
    /// `v1` or `group/version` of the object.
    pub api_version: &'a str,
    /// Plural resource name, e.g. `challenges`.
    pub resource: &'a str,
    /// Subresource, e.g. `finalize`; empty for the object itself.
    pub subresource: &'a str,
    /// The object's namespace; `None` when cluster-scoped.
    pub namespace: Option<&'a str>,
    /// The object's name (for a Namespace, the namespace selector reads
    /// its own labels).
    pub name: &'a str,
    /// The object's labels, when known.
    pub labels: Option<&'a BTreeMap<String, String>>,
}

impl<'a> Write<'a> {
    /// The kubelet's final DELETE of `pod` (grace 0, once its containers
    /// are gone): what a webhook matching pod DELETE rejects.
    pub fn final_delete_of(pod: &'a k8s_openapi::api::core::v1::Pod) -> Self {
        Write {
            operation: "DELETE",
            api_version: "v1",
            resource: "pods",
            subresource: "",
            namespace: pod.metadata.namespace.as_deref(),
            name: pod.metadata.name.as_deref().unwrap_or_default(),
            labels: Some(pod.metadata.labels.as_ref().unwrap_or(&NO_LABELS)),
        }
    }
}

/// The pod a finding is about, as the snapshot read it.
pub fn pod_of<'a>(
    snapshot: &'a Snapshot,
    subject: &super::model::ObjectRef,
) -> Option<&'a k8s_openapi::api::core::v1::Pod> {
    snapshot.pods.iter().find(|p| {
        p.metadata.name.as_deref() == Some(subject.name.as_str())
            && p.metadata.namespace == subject.namespace
            && (subject.uid.is_none() || p.metadata.uid == subject.uid)
    })
}

/// The labels of an object that has none (known to be none, unlike
/// [`Write::labels`]' `None`).
pub static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// Whether a webhook matches a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    /// It does not: the write never reaches it.
    No,
    /// It does, on everything the snapshot can evaluate.
    Yes,
    /// Its rules match; the rest could not be evaluated and is taken as a
    /// match, for this reason.
    Assumed(String),
}

impl Match {
    /// Whether the write is taken to reach the webhook.
    pub fn reaches(&self) -> bool {
        !matches!(self, Match::No)
    }
}

/// Whether `webhook` is called for `write`.
pub fn matches(webhook: &WebhookView<'_>, write: &Write<'_>, snapshot: &Snapshot) -> Match {
    let mut assumed: Vec<String> = Vec::new();
    let rule = webhook.rules.iter().find_map(|r| {
        rule_matches(r, write, webhook.match_policy).map(|equivalent| (r, equivalent))
    });
    let Some((_, equivalent)) = rule else {
        return Match::No;
    };
    if let Some(why) = equivalent {
        assumed.push(why);
    }
    match namespace_selector(webhook.namespace_selector, write, snapshot) {
        Some(false) => return Match::No,
        Some(true) => {}
        None => assumed.push(format!(
            "the labels of namespace {} were not read, so its namespaceSelector is taken to match",
            write.namespace.unwrap_or(write.name)
        )),
    }
    match (webhook.object_selector, write.labels) {
        (None, _) => {}
        (Some(sel), Some(labels)) => {
            if !selector_matches(sel, labels) {
                return Match::No;
            }
        }
        (Some(sel), None) if is_everything(sel) => {}
        (Some(_), None) => assumed.push(
            "the object's labels are unknown, so its objectSelector is taken to match".into(),
        ),
    }
    if webhook.match_conditions > 0 {
        assumed.push(format!(
            "it has {} matchCondition(s) (CEL), not evaluated here",
            webhook.match_conditions
        ));
    }
    if assumed.is_empty() {
        Match::Yes
    } else {
        Match::Assumed(assumed.join("; "))
    }
}

/// `Some(None)`: the rule matches exactly; `Some(Some(why))`: it matches
/// only through `matchPolicy: Equivalent` on another version, assumed;
/// `None`: it does not match.
fn rule_matches(
    rule: &k8s_openapi::api::admissionregistration::v1::RuleWithOperations,
    write: &Write<'_>,
    match_policy: &str,
) -> Option<Option<String>> {
    let (group, version) = split_api_version(write.api_version);
    let any = |list: &Option<Vec<String>>, want: &str| {
        list.as_deref()
            .unwrap_or_default()
            .iter()
            .any(|x| x == "*" || x == want)
    };
    if !any(&rule.operations, write.operation) || !any(&rule.api_groups, group) {
        return None;
    }
    let resource_ok = rule
        .resources
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r.as_str(), ""));
            (res == "*" || res == write.resource) && (sub == "*" || sub == write.subresource)
        });
    if !resource_ok || !scope_matches(rule.scope.as_deref(), write) {
        return None;
    }
    if any(&rule.api_versions, version) {
        return Some(None);
    }
    // Equivalent (the v1 default) sends a request for another version of
    // the same resource to the webhook, converted.
    (match_policy != "Exact").then(|| {
        Some(format!(
            "its rule names other versions of {}; matchPolicy {match_policy} sends {version} to it converted",
            write.resource
        ))
    })
}

fn scope_matches(scope: Option<&str>, write: &Write<'_>) -> bool {
    let namespace_object =
        write.resource == "namespaces" && split_api_version(write.api_version).0.is_empty();
    match scope.unwrap_or("*") {
        "Namespaced" => !namespace_object && write.namespace.is_some(),
        "Cluster" => namespace_object || write.namespace.is_none(),
        _ => true,
    }
}

/// `Some(matches)`, or `None` when the labels it needs were not read.
fn namespace_selector(
    selector: Option<&LabelSelector>,
    write: &Write<'_>,
    snapshot: &Snapshot,
) -> Option<bool> {
    let Some(sel) = selector.filter(|s| !is_everything(s)) else {
        return Some(true);
    };
    let namespace_object =
        write.resource == "namespaces" && split_api_version(write.api_version).0.is_empty();
    let ns_name = if namespace_object {
        write.name
    } else {
        match write.namespace {
            Some(ns) => ns,
            // Cluster-scoped objects other than namespaces skip it.
            None => return Some(true),
        }
    };
    let empty = BTreeMap::new();
    if namespace_object && let Some(labels) = write.labels {
        return Some(selector_matches(sel, labels));
    }
    let ns = snapshot.namespace(ns_name)?;
    Some(selector_matches(
        sel,
        ns.metadata.labels.as_ref().unwrap_or(&empty),
    ))
}

fn is_everything(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty())
}

/// A label selector on a label set, as `metav1.LabelSelectorAsSelector`.
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_label = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    by_label
        && sel
            .match_expressions
            .iter()
            .flatten()
            .all(|req| requirement_matches(req, labels))
}

fn requirement_matches(req: &LabelSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    let value = labels.get(&req.key);
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        // An operator the apiserver would have refused: match nothing.
        _ => false,
    }
}

#[cfg(test)]
mod tests;

//! Admission webhooks as the doctor sees them: one [`WebhookView`] per
//! webhook of every Validating/MutatingWebhookConfiguration, and the
//! apiserver's error text when calling one fails.
//!
//! A `failurePolicy: Fail` webhook whose backend is gone rejects every
//! operation it matches. When it matches DELETE, the namespace controller's
//! deletes fail and the namespace stays Terminating with
//! `NamespaceDeletionContentFailure=True (ContentDeletionFailed)`:
//! `Failed to delete all resource types, 1 remaining: Internal error
//! occurred: failed calling webhook "<name>": failed to call webhook: Post
//! "https://<svc>.<ns>.svc:443/<path>?timeout=5s": service "<svc>" not found`
//! (recorded from v1.34.4). When it matches UPDATE, finalizer-removal
//! patches fail the same way.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};

use super::snapshot::Snapshot;

/// Which kind of configuration a webhook lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WebhookConfigKind {
    /// `ValidatingWebhookConfiguration`.
    Validating,
    /// `MutatingWebhookConfiguration`.
    Mutating,
}

impl WebhookConfigKind {
    /// The Kubernetes kind.
    pub fn kind(self) -> &'static str {
        match self {
            WebhookConfigKind::Validating => "ValidatingWebhookConfiguration",
            WebhookConfigKind::Mutating => "MutatingWebhookConfiguration",
        }
    }

    /// The plural resource name.
    pub fn resource(self) -> &'static str {
        match self {
            WebhookConfigKind::Validating => "validatingwebhookconfigurations",
            WebhookConfigKind::Mutating => "mutatingwebhookconfigurations",
        }
    }
}

/// The Service a webhook calls.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceKey {
    /// Namespace of the Service.
    pub namespace: String,
    /// Name of the Service.
    pub name: String,
}

impl std::fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What the collector found when it looked up a webhook's or an
/// APIService's Service; [`super::backend::judge`] reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceLookup {
    /// The Service looked up.
    pub service: ServiceKey,
    /// Whether `GET` returned it (a 404 is `false`).
    pub exists: bool,
    /// Ready endpoints over its EndpointSlices at the last read; `None`
    /// when the Service does not exist or the slices could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_endpoints: Option<u32>,
    /// Why the lookup itself failed (neither found nor a 404): no proof
    /// either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// (Added) `spec.type` (`ClusterIP`, `ExternalName`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_type: Option<String>,
    /// (Added) `spec.externalName`, for an `ExternalName` Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_name: Option<String>,
    /// (Added) Whether `spec.selector` selects pods; `false`: endpoints
    /// are maintained by hand. `None`: not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_selector: Option<bool>,
    /// (Added) The selector as `k=v,...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// (Added) Each read of its EndpointSlices, in order; a second one
    /// [`super::backend::SUSTAINED`] later when the first found none ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<super::backend::EndpointRead>,
    /// (Added) The pods its selector matches, read with the last read;
    /// `None` when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<Vec<super::backend::BackendPod>>,
    /// (Added) Why the pods could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_error: Option<String>,
}

/// One webhook, flattened out of its configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookView<'a> {
    /// Validating or mutating.
    pub config_kind: WebhookConfigKind,
    /// The configuration's `metadata.name`.
    pub config_name: &'a str,
    /// The configuration's `metadata.uid`.
    pub config_uid: Option<&'a str>,
    /// The configuration's `metadata.resourceVersion`.
    pub config_resource_version: Option<&'a str>,
    /// Position in `webhooks` (the patch path).
    pub index: usize,
    /// The webhook's name (what the apiserver's error quotes).
    pub name: &'a str,
    /// `failurePolicy`; the v1 default is `Fail`.
    pub failure_policy: &'a str,
    /// `clientConfig`.
    pub client_config: &'a WebhookClientConfig,
    /// `rules`.
    pub rules: &'a [RuleWithOperations],
    /// `namespaceSelector` (`None`: every namespace).
    pub namespace_selector: Option<&'a LabelSelector>,
    /// `objectSelector` (`None`: every object).
    pub object_selector: Option<&'a LabelSelector>,
    /// `matchPolicy`; the v1 default is `Equivalent`.
    pub match_policy: &'a str,
    /// How many `matchConditions` (CEL) it has.
    pub match_conditions: usize,
}

impl WebhookView<'_> {
    /// Its configuration, as the subject of a finding about it.
    pub fn config_ref(&self) -> super::finding::ObjectRef {
        super::finding::ObjectRef {
            api_version: "admissionregistration.k8s.io/v1".into(),
            kind: self.config_kind.kind().into(),
            namespace: None,
            name: self.config_name.to_owned(),
            uid: self.config_uid.map(str::to_owned),
        }
    }

    /// The Service it calls, unless it calls a URL.
    pub fn service(&self) -> Option<ServiceKey> {
        self.client_config.service.as_ref().map(|s| ServiceKey {
            namespace: s.namespace.clone(),
            name: s.name.clone(),
        })
    }

    /// Whether a rule matches `operation` (`DELETE`, `UPDATE`, ...).
    pub fn matches_operation(&self, operation: &str) -> bool {
        self.rules.iter().any(|r| {
            r.operations
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|o| o == operation || o == "*")
        })
    }

    /// Whether the kubelet's final DELETE of `pod` reaches it, by the
    /// apiserver's matching ([`admission::matches`](super::admission::matches)).
    pub fn matches_final_delete_of(
        &self,
        pod: &k8s_openapi::api::core::v1::Pod,
        snapshot: &super::snapshot::Snapshot,
    ) -> bool {
        super::admission::matches(
            self,
            &super::admission::Write::final_delete_of(pod),
            snapshot,
        )
        .reaches()
    }

    /// The rules in one line: `DELETE,UPDATE configmaps (v1)`.
    pub fn rules_line(&self) -> String {
        self.rules
            .iter()
            .map(|r| {
                let ops = r.operations.as_deref().unwrap_or_default().join(",");
                let resources = r.resources.as_deref().unwrap_or_default().join(",");
                let groups: Vec<&str> = r
                    .api_groups
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .map(|g| if g.is_empty() { "core" } else { g.as_str() })
                    .collect();
                format!("{ops} {resources} ({})", groups.join(","))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Every webhook of every configuration in the snapshot, validating first.
pub fn webhooks(snapshot: &Snapshot) -> Vec<WebhookView<'_>> {
    // The two configuration kinds are two API types with the same fields.
    macro_rules! views_of {
        ($configs:expr, $kind:expr, $out:ident) => {
            for c in $configs {
                let meta = &c.metadata;
                for (index, w) in c.webhooks.iter().flatten().enumerate() {
                    $out.push(WebhookView {
                        config_kind: $kind,
                        config_name: meta.name.as_deref().unwrap_or_default(),
                        config_uid: meta.uid.as_deref(),
                        config_resource_version: meta.resource_version.as_deref(),
                        index,
                        name: &w.name,
                        failure_policy: w.failure_policy.as_deref().unwrap_or("Fail"),
                        client_config: &w.client_config,
                        rules: w.rules.as_deref().unwrap_or_default(),
                        namespace_selector: w.namespace_selector.as_ref(),
                        object_selector: w.object_selector.as_ref(),
                        match_policy: w.match_policy.as_deref().unwrap_or("Equivalent"),
                        match_conditions: w.match_conditions.as_ref().map_or(0, Vec::len),
                    });
                }
            }
        };
    }
    let mut out = Vec::new();
    views_of!(
        &snapshot.validating_webhooks,
        WebhookConfigKind::Validating,
        out
    );
    views_of!(
        &snapshot.mutating_webhooks,
        WebhookConfigKind::Mutating,
        out
    );
    out
}

/// The Services the webhooks of these configurations call, each once, in
/// order: what a collector must look up.
pub fn services_called(
    validating: &[ValidatingWebhookConfiguration],
    mutating: &[MutatingWebhookConfiguration],
) -> Vec<ServiceKey> {
    let v = validating
        .iter()
        .flat_map(|c| c.webhooks.iter().flatten())
        .map(|w| &w.client_config);
    let m = mutating
        .iter()
        .flat_map(|c| c.webhooks.iter().flatten())
        .map(|w| &w.client_config);
    let mut out: Vec<ServiceKey> = v
        .chain(m)
        .filter_map(|c| c.service.as_ref())
        .map(|s| ServiceKey {
            namespace: s.namespace.clone(),
            name: s.name.clone(),
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

const FAILED_CALLING: &str = "failed calling webhook \"";

/// The webhook names an apiserver error text quotes as
/// `failed calling webhook "<name>"`, each once, in order of appearance.
pub fn failed_webhooks(message: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = message;
    while let Some(at) = rest.find(FAILED_CALLING) {
        rest = &rest[at + FAILED_CALLING.len()..];
        let Some(end) = rest.find('"') else { break };
        let name = &rest[..end];
        if !name.is_empty() && !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
        rest = &rest[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_webhooks_reads_the_recorded_namespace_message() {
        let m = "Failed to delete all resource types, 1 remaining: Internal error occurred: failed calling webhook \"validate.policy.example.com\": failed to call webhook: Post \"https://policy-webhook.policy-system.svc:443/validate?timeout=5s\": service \"policy-webhook\" not found";
        assert_eq!(failed_webhooks(m), vec!["validate.policy.example.com"]);
    }

    #[test]
    fn failed_webhooks_lists_each_name_once() {
        let m = "a: failed calling webhook \"x.example.com\": e, b: failed calling webhook \"y.example.com\": e, c: failed calling webhook \"x.example.com\": e";
        assert_eq!(failed_webhooks(m), vec!["x.example.com", "y.example.com"]);
        assert!(failed_webhooks("All content successfully deleted").is_empty());
        assert!(failed_webhooks("failed calling webhook \"unterminated").is_empty());
    }

    #[test]
    fn a_pod_operation_matches_only_within_one_rule() {
        let rule = |ops: &[&str], groups: &[&str], resources: &[&str]| RuleWithOperations {
            operations: Some(ops.iter().map(|s| s.to_string()).collect()),
            api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
            api_versions: Some(vec!["v1".into()]),
            resources: Some(resources.iter().map(|s| s.to_string()).collect()),
            scope: None,
        };
        // DELETE of configmaps and UPDATE of pods: no rule matches pod DELETE.
        let rules = vec![
            rule(&["DELETE"], &[""], &["configmaps"]),
            rule(&["UPDATE"], &[""], &["pods"]),
        ];
        let config = WebhookClientConfig::default();
        let view = WebhookView {
            config_kind: WebhookConfigKind::Validating,
            config_name: "c",
            config_uid: None,
            config_resource_version: None,
            index: 0,
            name: "w.example.com",
            failure_policy: "Fail",
            client_config: &config,
            rules: &rules,
            namespace_selector: None,
            object_selector: None,
            match_policy: "Equivalent",
            match_conditions: 0,
        };
        let snapshot = Snapshot::default();
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "app"}
        }))
        .unwrap();
        assert!(!view.matches_final_delete_of(&pod, &snapshot));
        let update = crate::doctor::admission::Write {
            operation: "UPDATE",
            ..crate::doctor::admission::Write::final_delete_of(&pod)
        };
        assert!(crate::doctor::admission::matches(&view, &update, &snapshot).reaches());
        let any = vec![rule(&["*"], &["*"], &["*"])];
        let view = WebhookView {
            rules: &any,
            ..view
        };
        assert!(view.matches_final_delete_of(&pod, &snapshot));
        let other_group = vec![rule(&["DELETE"], &["apps"], &["pods"])];
        let view = WebhookView {
            rules: &other_group,
            ..view
        };
        assert!(!view.matches_final_delete_of(&pod, &snapshot));
    }
}

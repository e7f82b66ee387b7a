//! Admission webhooks as the doctor sees them: one [`WebhookView`] per
//! webhook of every Validating/MutatingWebhookConfiguration, as
//! [`crate::doctor::webhook::webhooks`] flattens them out of a snapshot.

use k8s_openapi::api::admissionregistration::v1::{RuleWithOperations, WebhookClientConfig};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};

use super::object::ObjectRef;
use super::service::ServiceKey;

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

/// One webhook's identity: its configuration and its position there. Its
/// name is not one: two configurations may hold webhooks of one name (two
/// installs of one product, a chart and its copy), and the apiserver's
/// errors quote only the name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WebhookId {
    /// Validating or mutating.
    pub config_kind: WebhookConfigKind,
    /// The configuration's `metadata.name`.
    pub config_name: String,
    /// Position in `webhooks`.
    pub index: usize,
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
    /// Which webhook this is, apart from any other of its name.
    pub fn id(&self) -> WebhookId {
        WebhookId {
            config_kind: self.config_kind,
            config_name: self.config_name.to_owned(),
            index: self.index,
        }
    }

    /// Its configuration, as the subject of a finding about it.
    pub fn config_ref(&self) -> ObjectRef {
        ObjectRef {
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

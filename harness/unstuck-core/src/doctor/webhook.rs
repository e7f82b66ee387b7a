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
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Namespace;

use super::model::snapshot::Snapshot;

pub use super::model::service::{ServiceKey, ServiceLookup};
pub use super::model::webhook::{WebhookConfigKind, WebhookId, WebhookView};

impl WebhookView<'_> {
    /// Whether the kubelet's final DELETE of `pod` reaches it, by the
    /// apiserver's matching ([`admission::matches`](super::admission::matches)).
    pub fn matches_final_delete_of(
        &self,
        pod: &k8s_openapi::api::core::v1::Pod,
        snapshot: &Snapshot,
    ) -> bool {
        super::admission::matches(
            self,
            &super::admission::Write::final_delete_of(pod),
            snapshot,
        )
        .reaches()
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

/// What an apiserver error says after each `failed calling webhook
/// "<name>"` for webhook `name`, each up to the next webhook it names.
fn calls_quoted<'m>(message: &'m str, name: &str) -> Vec<&'m str> {
    let opening = format!("{FAILED_CALLING}{name}\"");
    let mut calls = Vec::new();
    let mut rest = message;
    while let Some(at) = rest.find(&opening) {
        rest = &rest[at + opening.len()..];
        let end = rest.find(FAILED_CALLING).unwrap_or(rest.len());
        calls.push(&rest[..end]);
    }
    calls
}

/// The URL a quoted call posted to (`Post "https://...?timeout=5s"`),
/// without its query; `None` when the error does not quote it (an HTTP
/// error from the backend, a review it could not read).
fn posted_url(call: &str) -> Option<&str> {
    let start = call.find("Post \"")? + "Post \"".len();
    let url = &call[start..];
    let end = url.find(['"', '?']).unwrap_or(url.len());
    Some(&url[..end])
}

/// Whether webhook `w` can be the one a failing delete in namespace `ns`
/// called, when the apiserver's error `message` names a webhook of its
/// name. The name alone does not say which configuration's webhook it
/// was, so: the webhook must be called for that namespace (its
/// namespaceSelector matches the namespace's labels) and, where the error
/// quotes the URL it posted to, that URL must be its own (its Service's
/// `https://<name>.<namespace>.svc:`, or its `url`).
pub fn may_have_failed(w: &WebhookView<'_>, ns: &Namespace, message: &str) -> bool {
    let calls = calls_quoted(message, w.name);
    if calls.is_empty() {
        return false;
    }
    if let Some(sel) = w.namespace_selector {
        let labels = ns.metadata.labels.clone().unwrap_or_default();
        if !super::admission::selector_matches(sel, &labels) {
            return false;
        }
    }
    calls.iter().any(|call| match posted_url(call) {
        None => true,
        Some(url) => match (w.service(), w.client_config.url.as_deref()) {
            (Some(s), _) => url.starts_with(&format!("https://{}.{}.svc:", s.name, s.namespace)),
            (None, Some(own)) => url == own.split('?').next().unwrap_or(own),
            (None, None) => false,
        },
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::admissionregistration::v1::{RuleWithOperations, WebhookClientConfig};

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

    #[test]
    fn a_failure_is_pinned_on_the_webhook_whose_url_it_quotes() {
        let service = |ns: &str| WebhookClientConfig {
            service: Some(
                k8s_openapi::api::admissionregistration::v1::ServiceReference {
                    namespace: ns.into(),
                    name: "policy-webhook".into(),
                    path: Some("/validate".into()),
                    port: Some(443),
                },
            ),
            ..Default::default()
        };
        let (a, b) = (service("policy-a"), service("policy-b"));
        let url = WebhookClientConfig {
            url: Some("https://policy.example.invalid:8443/validate".into()),
            ..Default::default()
        };
        let view = |config: &'static str, client_config| WebhookView {
            config_kind: WebhookConfigKind::Validating,
            config_name: config,
            config_uid: None,
            config_resource_version: None,
            index: 0,
            name: "validate.policy.example.com",
            failure_policy: "Fail",
            client_config,
            rules: &[],
            namespace_selector: None,
            object_selector: None,
            match_policy: "Equivalent",
            match_conditions: 0,
        };
        let ns = Namespace::default();
        // Two webhooks named in one message, each with its own URL.
        let m = "Failed to delete all resource types, 2 remaining: [Internal error occurred: failed calling webhook \"other.example.com\": failed to call webhook: Post \"https://policy-webhook.policy-a.svc:443/x?timeout=5s\": EOF, Internal error occurred: failed calling webhook \"validate.policy.example.com\": failed to call webhook: Post \"https://policy-webhook.policy-b.svc:443/validate?timeout=5s\": context deadline exceeded]";
        assert!(!may_have_failed(&view("a", &a), &ns, m));
        assert!(may_have_failed(&view("b", &b), &ns, m));
        assert!(!may_have_failed(&view("u", &url), &ns, m));
        // A URL webhook is pinned by its own URL.
        let by_url = "failed calling webhook \"validate.policy.example.com\": failed to call webhook: Post \"https://policy.example.invalid:8443/validate?timeout=5s\": EOF";
        assert!(may_have_failed(&view("u", &url), &ns, by_url));
        assert!(!may_have_failed(&view("a", &a), &ns, by_url));
        // No URL quoted (the backend answered 500): any of the name may be it.
        let answered = "failed calling webhook \"validate.policy.example.com\": failed to call webhook: an error on the server (\"boom\") has prevented the request from succeeding";
        assert!(may_have_failed(&view("a", &a), &ns, answered));
        assert!(may_have_failed(&view("b", &b), &ns, answered));
        // Not named at all.
        assert!(!may_have_failed(
            &view("a", &a),
            &ns,
            "All content successfully deleted"
        ));
    }
}

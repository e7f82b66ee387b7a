//! The matcher on published webhook configurations (the fixtures the
//! scenarios install): cert-manager's and Gatekeeper's.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Namespace;

use super::*;
use crate::doctor::webhook::webhooks;

fn fixture_docs(path: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(path);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.split("\n---\n").map(str::to_owned).collect()
}

fn yaml<T: serde::de::DeserializeOwned>(doc: &str) -> T {
    serde_saphyr::from_str(doc).unwrap_or_else(|e| panic!("parsing {doc}: {e}"))
}

fn namespace(name: &str, labels: &[(&str, &str)]) -> Namespace {
    let mut l: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.insert("kubernetes.io/metadata.name".into(), name.into());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    ns.metadata.labels = Some(l);
    ns
}

fn cert_manager() -> Snapshot {
    let docs = fixture_docs("cert-manager-webhook/webhooks.yaml");
    let validating: ValidatingWebhookConfiguration = yaml(&docs[0]);
    let mutating: MutatingWebhookConfiguration = yaml(&docs[1]);
    Snapshot {
        validating_webhooks: vec![validating],
        mutating_webhooks: vec![mutating],
        namespaces: vec![
            namespace("cm-app", &[]),
            namespace("legacy", &[("cert-manager.io/disable-validation", "true")]),
        ],
        ..Default::default()
    }
}

fn challenge_update<'a>(ns: &'a str) -> Write<'a> {
    Write {
        operation: "UPDATE",
        api_version: "acme.cert-manager.io/v1",
        resource: "challenges",
        subresource: "",
        namespace: Some(ns),
        name: "web-tls-1",
        labels: None,
    }
}

#[test]
fn cert_managers_validating_webhook_takes_a_challenges_finalizer_patch() {
    let s = cert_manager();
    let all = webhooks(&s);
    let (validating, mutating) = (&all[0], &all[1]);
    assert_eq!(
        matches(validating, &challenge_update("cm-app"), &s),
        Match::Yes
    );
    // Its namespaceSelector exempts namespaces labelled disable-validation.
    assert_eq!(
        matches(validating, &challenge_update("legacy"), &s),
        Match::No
    );
    // Not read: assumed, and said.
    let unread = matches(validating, &challenge_update("elsewhere"), &s);
    assert!(
        matches!(&unread, Match::Assumed(why) if why.contains("namespace elsewhere")),
        "{unread:?}"
    );
    // The mutating one takes only CREATE of certificaterequests.
    assert_eq!(
        matches(mutating, &challenge_update("cm-app"), &s),
        Match::No
    );
    // A DELETE (the namespace controller's) is not in its rules.
    let delete = Write {
        operation: "DELETE",
        ..challenge_update("cm-app")
    };
    assert_eq!(matches(validating, &delete, &s), Match::No);
    // Equivalent: another version of the same resource reaches it, converted.
    let v1alpha2 = Write {
        api_version: "acme.cert-manager.io/v1alpha2",
        ..challenge_update("cm-app")
    };
    assert!(matches!(
        matches(validating, &v1alpha2, &s),
        Match::Assumed(_)
    ));
    // Other groups do not.
    let configmap = Write {
        api_version: "v1",
        resource: "configmaps",
        ..challenge_update("cm-app")
    };
    assert_eq!(matches(validating, &configmap, &s), Match::No);
}

fn gatekeeper() -> Snapshot {
    let docs = fixture_docs("gatekeeper-webhook/webhook.yaml");
    Snapshot {
        validating_webhooks: vec![yaml(&docs[0])],
        namespaces: vec![
            namespace("cattle-fleet-system", &[]),
            namespace("gatekeeper-system", &[]),
        ],
        ..Default::default()
    }
}

fn namespace_write<'a>(name: &'a str, subresource: &'a str) -> Write<'a> {
    Write {
        operation: "UPDATE",
        api_version: "v1",
        resource: "namespaces",
        subresource,
        namespace: None,
        name,
        labels: None,
    }
}

#[test]
fn gatekeepers_label_check_takes_a_namespace_update_but_not_finalize() {
    let s = gatekeeper();
    let all = webhooks(&s);
    let check = all
        .iter()
        .find(|w| w.name == "check-ignore-label.gatekeeper.sh")
        .unwrap();
    // Removing a namespace's metadata.finalizers is an UPDATE of namespaces.
    assert_eq!(
        matches(check, &namespace_write("cattle-fleet-system", ""), &s),
        Match::Yes
    );
    // /finalize is a subresource its rule does not name; /status neither.
    assert_eq!(
        matches(
            check,
            &namespace_write("cattle-fleet-system", "finalize"),
            &s
        ),
        Match::No
    );
    // Its own namespace is exempt, read from the namespace's own labels.
    assert_eq!(
        matches(check, &namespace_write("gatekeeper-system", ""), &s),
        Match::No
    );
    // The validation webhook ('*', main resources only) takes namespace
    // UPDATEs too, and a ConfigMap's; not pods/status.
    let validation = all
        .iter()
        .find(|w| w.name == "validation.gatekeeper.sh")
        .unwrap();
    assert_eq!(
        matches(validation, &namespace_write("cattle-fleet-system", ""), &s),
        Match::Yes
    );
    let status = Write {
        api_version: "v1",
        resource: "pods",
        subresource: "status",
        namespace: Some("cattle-fleet-system"),
        ..namespace_write("web-0", "")
    };
    assert_eq!(matches(validation, &status, &s), Match::No);
}

#[test]
fn selectors_follow_the_apiserver() {
    let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())]
        .into_iter()
        .collect();
    let sel = |json: serde_json::Value| -> LabelSelector { serde_json::from_value(json).unwrap() };
    assert!(selector_matches(&sel(serde_json::json!({})), &labels));
    assert!(selector_matches(
        &sel(serde_json::json!({"matchLabels": {"app": "web"}})),
        &labels
    ));
    assert!(!selector_matches(
        &sel(serde_json::json!({"matchLabels": {"app": "db"}})),
        &labels
    ));
    for (op, values, want) in [
        ("In", vec!["web", "x"], true),
        ("In", vec!["x"], false),
        ("NotIn", vec!["web"], false),
        ("NotIn", vec!["x"], true),
        ("Exists", vec![], true),
        ("DoesNotExist", vec![], false),
    ] {
        let s = sel(
            serde_json::json!({"matchExpressions": [{"key": "app", "operator": op, "values": values}]}),
        );
        assert_eq!(selector_matches(&s, &labels), want, "{op} {values:?}");
    }
    // On a label that is absent: NotIn and DoesNotExist match.
    let s = sel(
        serde_json::json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}),
    );
    assert!(selector_matches(&s, &labels));
}

#[test]
fn scope_and_object_selector() {
    use k8s_openapi::api::admissionregistration::v1::{
        RuleWithOperations, ValidatingWebhook, WebhookClientConfig,
    };
    let rule = |scope: &str| RuleWithOperations {
        operations: Some(vec!["UPDATE".into()]),
        api_groups: Some(vec!["*".into()]),
        api_versions: Some(vec!["*".into()]),
        resources: Some(vec!["*".into()]),
        scope: Some(scope.into()),
    };
    let config =
        |scope: &str, object_selector: Option<LabelSelector>| ValidatingWebhookConfiguration {
            webhooks: Some(vec![ValidatingWebhook {
                name: "w.example.com".into(),
                rules: Some(vec![rule(scope)]),
                object_selector,
                client_config: WebhookClientConfig::default(),
                admission_review_versions: vec!["v1".into()],
                side_effects: "None".into(),
                ..Default::default()
            }]),
            ..Default::default()
        };
    let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())]
        .into_iter()
        .collect();
    let cm = Write {
        operation: "UPDATE",
        api_version: "v1",
        resource: "configmaps",
        subresource: "",
        namespace: Some("app"),
        name: "cfg",
        labels: Some(&labels),
    };
    let snap = |c| Snapshot {
        validating_webhooks: vec![c],
        namespaces: vec![namespace("app", &[])],
        ..Default::default()
    };
    let s = snap(config("Cluster", None));
    assert_eq!(matches(&webhooks(&s)[0], &cm, &s), Match::No);
    // A Namespace counts as cluster-scoped, never as namespaced.
    let ns = namespace_write("app", "");
    assert_eq!(matches(&webhooks(&s)[0], &ns, &s), Match::Yes);
    let s = snap(config("Namespaced", None));
    assert_eq!(matches(&webhooks(&s)[0], &cm, &s), Match::Yes);
    assert_eq!(matches(&webhooks(&s)[0], &ns, &s), Match::No);
    let only_db: LabelSelector =
        serde_json::from_value(serde_json::json!({"matchLabels": {"app": "db"}})).unwrap();
    let s = snap(config("*", Some(only_db)));
    assert_eq!(matches(&webhooks(&s)[0], &cm, &s), Match::No);
    let unknown_labels = Write { labels: None, ..cm };
    assert!(matches!(
        matches(&webhooks(&s)[0], &unknown_labels, &s),
        Match::Assumed(_)
    ));
}

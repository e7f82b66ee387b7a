use super::*;
use serde_json::Value;

/// A fixture CRD as the scenarios apply it, with `status.storedVersions`
/// as the apiserver records it after the upgrade they make.
fn fixture_crd(path: &str, stored: &[&str]) -> CustomResourceDefinition {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(path);
    let text = std::fs::read_to_string(&file).expect("fixture");
    let mut docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML");
    let mut doc = docs.remove(0);
    doc["status"] = serde_json::json!({"storedVersions": stored});
    serde_json::from_value(doc).expect("a CRD")
}

/// OSM v1.1.0's MultiClusterService: v1alpha2 and v1alpha1 share a schema.
fn same_schemas(stored: &[&str]) -> CustomResourceDefinition {
    fixture_crd("crd-conversion-webhook-service-gone/crd.yaml", stored)
}

/// OSM v1.1.0's MeshConfig: v1alpha2 adds fields.
fn different_schemas(stored: &[&str]) -> CustomResourceDefinition {
    fixture_crd("crd-conversion-webhook-schemas-differ/crd.yaml", stored)
}

#[test]
fn reads_the_recorded_namespace_and_cache_messages() {
    // Recorded on v1.34.4: the namespace condition, and an unpaged list
    // served by the watch cache.
    let condition = "Failed to delete all resource types, 1 remaining: conversion webhook for config.openservicemesh.io/v1alpha1, Kind=MultiClusterService failed: Post \"https://osm-bootstrap.osm-system.svc:9443/convert/multiclusterservice?timeout=30s\": service \"osm-bootstrap\" not found";
    let cache = "storage is (re)initializing: failed to list config.openservicemesh.io/v1alpha2, Kind=MultiClusterService: conversion webhook for config.openservicemesh.io/v1alpha1, Kind=MultiClusterService failed: Post \"https://osm-bootstrap.osm-system.svc:9443/convert/multiclusterservice?timeout=30s\": service \"osm-bootstrap\" not found";
    let want = vec![FailedConversion {
        group: "config.openservicemesh.io".into(),
        version: "v1alpha1".into(),
        kind: "MultiClusterService".into(),
    }];
    // v1.37.2's namespace condition.
    let v1_37 = "Failed to delete all resource types, 1 remaining: failed to read one or more multiclusterservices.config-orf657.openservicemesh.io from the storage: StorageError: corrupt object, Code: 7, Key: /registry/config-orf657.openservicemesh.io/multiclusterservices/east-orf657/bookstore, ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision=313: conversion webhook for config-orf657.openservicemesh.io/v1alpha1, Kind=MultiClusterService failed: Post \"https://osm-bootstrap.osm-system.svc:9443/convert/multiclusterservice?timeout=30s\": service \"osm-bootstrap\" not found";
    assert_eq!(failed_conversions(condition), want);
    assert_eq!(failed_conversions(cache), want);
    assert!(quotes(
        v1_37,
        "config-orf657.openservicemesh.io",
        "MultiClusterService"
    ));
    assert!(quotes(
        condition,
        "config.openservicemesh.io",
        "MultiClusterService"
    ));
    assert!(!quotes(
        condition,
        "config.openservicemesh.io",
        "MeshConfig"
    ));
    assert!(!quotes(
        condition,
        "openservicemesh.io",
        "MultiClusterService"
    ));
    assert!(failed_conversions("All content successfully deleted").is_empty());
    // An admission webhook's failure is not a conversion failure.
    assert!(
        failed_conversions("failed calling webhook \"validate.policy.example.com\": x").is_empty()
    );
}

#[test]
fn each_quoted_conversion_is_listed_once() {
    let m = "a: conversion webhook for a.example.com/v1, Kind=Foo failed: x; b: conversion webhook for b.example.com/v2, Kind=Bar returned 0 objects, c: conversion webhook for a.example.com/v1, Kind=Foo failed: x";
    let kinds: Vec<(String, String)> = failed_conversions(m)
        .into_iter()
        .map(|f| (f.group, f.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("a.example.com".to_owned(), "Foo".to_owned()),
            ("b.example.com".to_owned(), "Bar".to_owned())
        ]
    );
}

#[test]
fn identical_schemas_with_every_stored_version_among_them_show_no_difference_and_never_claim_lossless()
 {
    let proof = strategy_none_proof(&same_schemas(&["v1alpha1", "v1alpha2"]));
    assert!(proof.no_schema_difference, "{:#?}", proof.evidence);
    let all = proof.evidence.join("\n");
    assert!(all.contains("nopConverter"), "{all}");
    assert!(all.contains("[v1alpha2, v1alpha1]"), "{all}");
    assert!(
        all.contains("status.storedVersions [v1alpha1, v1alpha2]"),
        "{all}"
    );
    assert!(all.contains("no schema difference found"), "{all}");
    assert!(!all.contains("lossless"), "{all}");
    // What the webhook did is never checkable.
    assert!(
        proof.unchecked[0].starts_with("what the conversion webhook did"),
        "{:?}",
        proof.unchecked
    );
}

/// Two versions that both keep unknown fields compare equal, yet their
/// objects hold fields no schema names: listed as not checked.
#[test]
fn preserved_unknown_fields_and_defaults_are_listed_as_not_checked() {
    let mut crd = same_schemas(&["v1alpha1", "v1alpha2"]);
    for v in &mut crd.spec.versions {
        let mut schema = serde_json::to_value(&v.schema).unwrap();
        schema["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] =
            serde_json::Value::Bool(true);
        schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"] =
            serde_json::json!({"type": "integer", "default": 1});
        v.schema = serde_json::from_value(schema).unwrap();
    }
    let proof = strategy_none_proof(&crd);
    assert!(proof.no_schema_difference, "{:#?}", proof.evidence);
    let unchecked = proof.unchecked.join("\n");
    assert!(
        unchecked
            .contains("x-kubernetes-preserve-unknown-fields (v1alpha2 at spec; v1alpha1 at spec)"),
        "{unchecked}"
    );
    // OSM's own defaults (spec.ports[].protocol, ...) and the one added.
    assert!(
        unchecked.contains(
            "defaults (v1alpha2 at spec.clusters[].weight, spec.ports[].protocol, spec.replicas;"
        ),
        "{unchecked}"
    );
    assert!(proof.reason.contains("not checked: "), "{}", proof.reason);
}

#[test]
fn different_schemas_show_a_loss_and_say_which_fields() {
    let proof = strategy_none_proof(&different_schemas(&["v1alpha1", "v1alpha2"]));
    assert!(!proof.no_schema_difference);
    let all = proof.evidence.join("\n");
    assert!(
        all.contains("versions v1alpha2 and v1alpha1 have different schemas"),
        "{all}"
    );
    // Fields OSM v1.1.0 added in v1alpha2.
    assert!(all.contains("spec.sidecar.tlsMinProtocolVersion"), "{all}");
    assert!(
        all.contains("spec.traffic.outboundIPRangeInclusionList"),
        "{all}"
    );
}

#[test]
fn stored_versions_must_be_known_and_among_the_versions() {
    let unknown = strategy_none_proof(&same_schemas(&[]));
    assert!(!unknown.no_schema_difference);
    assert!(unknown.evidence.join(" ").contains("not recorded"));
    let removed = strategy_none_proof(&same_schemas(&["v1alpha1", "v1beta1", "v1alpha2"]));
    assert!(!removed.no_schema_difference);
    assert!(
        removed
            .evidence
            .join(" ")
            .contains("stored version v1beta1 is not in spec.versions")
    );
    // Only the storage version stored: still every served version compared.
    assert!(strategy_none_proof(&same_schemas(&["v1alpha2"])).no_schema_difference);
}

#[test]
fn different_subresources_show_a_difference() {
    let mut crd = same_schemas(&["v1alpha1", "v1alpha2"]);
    crd.spec.versions[1].subresources = Some(Default::default());
    let proof = strategy_none_proof(&crd);
    assert!(!proof.no_schema_difference);
    assert!(proof.evidence.join(" ").contains("different subresources"));
}

#[test]
fn the_service_of_a_webhook_conversion_only() {
    let crd = same_schemas(&["v1alpha1"]);
    assert_eq!(
        conversion_service(&crd),
        Some(ServiceKey {
            namespace: "osm-system".into(),
            name: "osm-bootstrap".into()
        })
    );
    let none = fixture_crd(
        "crd-conversion-webhook-schemas-differ/crd-conversion-unset.yaml",
        &["v1alpha1"],
    );
    assert!(!converts_through_webhook(&none));
    assert_eq!(conversion_service(&none), None);
    assert_eq!(
        services_called(&[crd.clone(), none, crd]).len(),
        1,
        "each Service once"
    );
}

use serde_json::json;

use super::*;

#[test]
fn field_names_keep_names_and_finalizers_and_drop_key_values() {
    let fields = json!({
        "f:metadata": {
            "f:finalizers": {".": {}, "v:\"example.com/cleanup\"": {}},
            "f:labels": {"f:app": {}},
            "k:{\"weird\":\"top\"}": {}
        },
        "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {
            "f:env": {"k:{\"name\":\"DB_PASSWORD\"}": {".": {}, "f:value": {}}}
        }}},
        "f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {}}},
        "v:\"set-item\"": {}
    });
    assert_eq!(
        field_names(&fields),
        json!({
            "f:metadata": {
                "f:finalizers": {".": {}, "v:\"example.com/cleanup\"": {}},
                "f:labels": {}
            },
            "f:spec": {},
            "f:status": {}
        })
    );
}

#[test]
fn only_the_doctors_own_annotations_keep_their_values() {
    let mut m = ObjectMeta {
        annotations: Some(
            [
                ("unstuck.dev/webhook-gate", "{\"webhook\":\"v\"}"),
                (
                    "example.com/token",
                    "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
                ),
                (
                    "nginx.ingress.kubernetes.io/configuration-snippet",
                    "auth_basic_user_file htpasswd; set $pw s3cret;",
                ),
                ("deployment.kubernetes.io/revision", "3"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        ),
        ..Default::default()
    };
    meta(&mut m);
    let a = m.annotations.unwrap();
    assert_eq!(a["unstuck.dev/webhook-gate"], "{\"webhook\":\"v\"}");
    assert_eq!(a["example.com/token"], "<redacted: 42 bytes>");
    assert!(a["nginx.ingress.kubernetes.io/configuration-snippet"].starts_with("<redacted: "));
    assert_eq!(
        a["deployment.kubernetes.io/revision"],
        "<redacted: 1 bytes>"
    );
    // Twice changes nothing more.
    let mut again = ObjectMeta {
        annotations: Some(a.clone()),
        ..Default::default()
    };
    meta(&mut again);
    assert_eq!(again.annotations.unwrap(), a);
}

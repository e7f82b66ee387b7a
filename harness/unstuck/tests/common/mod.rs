//! What the integration tests that bring up real local clusters share.

use unstuck::cluster::local::layout::validate_name;

/// The longest cluster name [`validate_name`] accepts.
const MAX_NAME_LEN: usize = 30;

/// A local cluster name unique to this test process: `base` followed by
/// the process id, so two `cargo test` runs on one machine never ask for
/// the same cluster. `base` is shortened if needed to stay a valid name.
pub fn cluster_name(base: &str) -> String {
    let suffix = format!("-{}", std::process::id());
    let keep = MAX_NAME_LEN.saturating_sub(suffix.len()).min(base.len());
    let name = format!("{}{suffix}", base[..keep].trim_end_matches('-'));
    if let Err(e) = validate_name(&name) {
        panic!("test cluster name from '{base}': {e}");
    }
    name
}

#[test]
fn cluster_names_are_valid_and_carry_the_process_id() {
    let pid = std::process::id().to_string();
    for base in ["it-scenarios", "it-fault-cleanup", "it-node-subpath"] {
        let name = cluster_name(base);
        assert_eq!(name, format!("{base}-{pid}"));
    }
    let long = cluster_name(&"a-".repeat(20));
    assert!(
        long.len() <= MAX_NAME_LEN && long.ends_with(&format!("-{pid}")),
        "{long}"
    );
}

/// An object from its JSON, for the objects tests create.
#[allow(dead_code)]
pub fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("a valid object")
}

/// A kubeconfig at `path` for ServiceAccount `namespace/name`, created
/// here with the ClusterRole `rules` bound to it: the admin's kubeconfig
/// with the account's token (from the TokenRequest API) as the user. The
/// ClusterRole and its binding are named `name-<process id>`.
#[allow(dead_code)]
pub async fn service_account_kubeconfig(
    client: &kube::Client,
    admin_kubeconfig: &std::path::Path,
    namespace: &str,
    name: &str,
    rules: serde_json::Value,
    path: &std::path::Path,
) {
    use k8s_openapi::api::{
        authentication::v1::TokenRequest,
        core::v1::ServiceAccount,
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    };
    use kube::{Api, api::PostParams};
    use unstuck::wait::{self, Poll};

    let role = format!("{name}-{}", std::process::id());
    Api::<ClusterRole>::all(client.clone())
        .create(
            &PostParams::default(),
            &from_json(serde_json::json!({"metadata": {"name": role}, "rules": rules})),
        )
        .await
        .expect("clusterrole");
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(
            &PostParams::default(),
            &from_json(serde_json::json!({
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
            })),
        )
        .await
        .expect("clusterrolebinding");
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    sas.create(
        &PostParams::default(),
        &from_json(serde_json::json!({"metadata": {"name": name}})),
    )
    .await
    .expect("serviceaccount");
    let request: TokenRequest = from_json(serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": [], "expirationSeconds": 3600}
    }));
    let token = wait::until(
        format!("a token for ServiceAccount {namespace}/{name}"),
        std::time::Duration::from_secs(120),
        std::time::Duration::from_secs(1),
        || async {
            match sas
                .create_subresource::<TokenRequest, TokenRequest>(
                    "token",
                    name,
                    &PostParams::default(),
                    &request,
                )
                .await
            {
                Ok(t) => match t.status {
                    Some(s) => Poll::Ready(s.token),
                    None => Poll::Pending("no status".into()),
                },
                Err(e) => Poll::Pending(e.to_string()),
            }
        },
    )
    .await
    .expect("TokenRequest");
    let mut kc = kube::config::Kubeconfig::read_from(admin_kubeconfig).expect("admin kubeconfig");
    for a in &mut kc.auth_infos {
        a.auth_info = Some(from_json(serde_json::json!({"token": token})));
    }
    std::fs::write(path, serde_json::to_string(&kc).unwrap()).expect("write kubeconfig");
}

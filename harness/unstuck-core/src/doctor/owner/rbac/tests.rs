use super::*;

fn rbac(v: serde_json::Value) -> Rbac {
    serde_json::from_value(v).expect("RBAC objects")
}

fn req<'a>(group: &'a str, resource: &'a str, ns: Option<&'a str>) -> Request<'a> {
    Request {
        group,
        resource,
        namespace: ns,
        name: "cluster1",
    }
}

/// An aggregated ClusterRole whose rules the aggregation controller has
/// not filled (kube-controller-manager down, or the role just made):
/// its grant is the union of the roles its selector matches, read here.
/// The shape is Crossplane's `crossplane-admin` (its Helm chart,
/// templates/rbac-manager-managed-clusterroles.yaml: an aggregationRule
/// on `rbac.crossplane.io/aggregate-to-admin: "true"`).
#[test]
fn an_aggregated_cluster_role_is_resolved_from_its_selectors_not_its_empty_rules() {
    let r = rbac(serde_json::json!({
        "clusterRoles": [
            {"metadata": {"name": "crossplane-admin"},
             "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"rbac.crossplane.io/aggregate-to-admin": "true"}}]},
             "rules": []},
            {"metadata": {"name": "crossplane:aggregate-to-admin",
                          "labels": {"rbac.crossplane.io/aggregate-to-admin": "true"}},
             "rules": [{"apiGroups": ["pxc.percona.com"], "resources": ["perconaxtradbclusters"], "verbs": ["update"]}]},
            {"metadata": {"name": "unrelated", "labels": {"other": "true"}},
             "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"]}]}
        ],
        "clusterRoleBindings": [{"metadata": {"name": "remote-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "crossplane-admin"},
            "subjects": [{"kind": "User", "name": "mgmt-cluster-operator"}]}]
    }));
    let g = r.grants(&req("pxc.percona.com", "perconaxtradbclusters", Some("db")));
    assert_eq!(g.to_outside.len(), 1, "{g:?}");
    assert_eq!(g.to_outside[0].subject, "User mgmt-cluster-operator");
    assert_eq!(
        g.to_outside[0].role,
        "ClusterRole crossplane-admin (aggregated)"
    );
    // What the selector does not match grants nothing.
    assert!(
        r.grants(&req("", "configmaps", Some("db")))
            .to_outside
            .is_empty()
    );
}

#[test]
fn a_cluster_role_binding_grants_everywhere_and_a_role_binding_only_in_its_namespace() {
    let r = rbac(serde_json::json!({
        "clusterRoles": [{"metadata": {"name": "pxc-operator"}, "rules": [
            {"apiGroups": ["pxc.percona.com"], "resources": ["perconaxtradbclusters", "perconaxtradbclusters/status"], "verbs": ["get", "list", "update", "patch"]}]}],
        "roles": [{"metadata": {"name": "local", "namespace": "db"}, "rules": [
            {"apiGroups": ["pxc.percona.com"], "resources": ["*"], "verbs": ["*"]}]}],
        "clusterRoleBindings": [{"metadata": {"name": "pxc-operator"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pxc-operator"},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "pxc"}]}],
        "roleBindings": [{"metadata": {"name": "local", "namespace": "db"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "local"},
            "subjects": [{"kind": "ServiceAccount", "name": "helper"}]}]
    }));
    let g = r.grants(&req("pxc.percona.com", "perconaxtradbclusters", Some("db")));
    assert_eq!(g.to_service_accounts.len(), 2, "{g:?}");
    let op = &g.to_service_accounts[0];
    assert!(op.grantee.covers("pxc", "op"));
    assert_eq!(op.breadth, Breadth::Specific);
    assert_eq!(op.binding, "ClusterRoleBinding pxc-operator");
    let helper = &g.to_service_accounts[1];
    assert!(helper.grantee.covers("db", "helper"), "{helper:?}");
    assert_eq!(helper.breadth, Breadth::GroupWide);
    // Elsewhere the RoleBinding grants nothing.
    let g = r.grants(&req(
        "pxc.percona.com",
        "perconaxtradbclusters",
        Some("other"),
    ));
    assert_eq!(g.to_service_accounts.len(), 1);
    // Another group: nothing.
    assert!(
        r.grants(&req("", "configmaps", Some("db")))
            .to_service_accounts
            .is_empty()
    );
}

#[test]
fn verbs_resource_names_and_subresources_are_honoured() {
    let r = rbac(serde_json::json!({
        "clusterRoles": [
            {"metadata": {"name": "reader"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]},
            {"metadata": {"name": "one"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["other"], "verbs": ["update"]}]},
            {"metadata": {"name": "finalize"}, "rules": [{"apiGroups": [""], "resources": ["namespaces/finalize"], "verbs": ["update"]}]},
            {"metadata": {"name": "admin"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
        ],
        "clusterRoleBindings": [
            {"metadata": {"name": "r"}, "roleRef": {"apiGroup": "", "kind": "ClusterRole", "name": "reader"}, "subjects": [{"kind": "ServiceAccount", "name": "a", "namespace": "x"}]},
            {"metadata": {"name": "o"}, "roleRef": {"apiGroup": "", "kind": "ClusterRole", "name": "one"}, "subjects": [{"kind": "ServiceAccount", "name": "b", "namespace": "x"}]},
            {"metadata": {"name": "f"}, "roleRef": {"apiGroup": "", "kind": "ClusterRole", "name": "finalize"}, "subjects": [{"kind": "User", "name": "system:serviceaccount:x:c"}]},
            {"metadata": {"name": "cluster-admin"}, "roleRef": {"apiGroup": "", "kind": "ClusterRole", "name": "admin"}, "subjects": [{"kind": "Group", "name": "system:masters"}, {"kind": "User", "name": "alice"}]}
        ]
    }));
    let g = r.grants(&req("", "configmaps", Some("app")));
    assert!(
        g.to_service_accounts.is_empty(),
        "reader and another name: {g:?}"
    );
    assert_eq!(
        g.to_others,
        vec!["User alice (ClusterRoleBinding cluster-admin)"]
    );
    let g = r.grants(&req("", "namespaces/finalize", None));
    assert_eq!(g.to_service_accounts.len(), 1);
    assert!(g.to_service_accounts[0].grantee.covers("x", "c"));
    assert!(
        r.grants(&req("", "namespaces", None))
            .to_service_accounts
            .is_empty()
    );
}

#[test]
fn names_matter_only_where_a_rule_names_objects_of_that_type() {
    let r = rbac(serde_json::json!({
        "clusterRoles": [{"metadata": {"name": "one"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cm-a"], "verbs": ["update"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s-a"], "verbs": ["get"]}]}]
    }));
    assert!(r.names_objects(&req("", "configmaps", Some("x"))));
    assert!(!r.names_objects(&req("", "secrets", Some("x"))), "only get");
    assert!(!r.names_objects(&req("apps", "deployments", Some("x"))));
}

#[test]
fn wildcard_groups_are_told_apart_and_service_account_groups_count() {
    let r = rbac(serde_json::json!({
        "clusterRoles": [{"metadata": {"name": "argocd-application-controller"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}],
        "clusterRoleBindings": [{"metadata": {"name": "argocd"}, "roleRef": {"apiGroup": "", "kind": "ClusterRole", "name": "argocd-application-controller"},
            "subjects": [{"kind": "ServiceAccount", "name": "argocd-application-controller", "namespace": "argocd"}, {"kind": "Group", "name": "system:serviceaccounts:ci"}]}]
    }));
    let g = r.grants(&req("pxc.percona.com", "perconaxtradbclusters", Some("db")));
    assert_eq!(g.to_service_accounts.len(), 2);
    assert!(
        g.to_service_accounts
            .iter()
            .all(|g| g.breadth == Breadth::Wildcard)
    );
    assert!(g.to_service_accounts[1].grantee.covers("ci", "anything"));
    assert!(!g.to_service_accounts[1].grantee.covers("prod", "anything"));
}

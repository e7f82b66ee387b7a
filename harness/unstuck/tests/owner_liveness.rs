//! Issue 17 on real components: a finalizer's owner is judged by who can
//! act on the object, not by names.
//!
//! An operator of the test's own runs in a pod (busybox running the
//! cluster's own kubectl with its ServiceAccount's token): RBAC lets it
//! update its custom resources, it writes `status.state: stopping` to a
//! deleted one every few seconds while it "finalizes slowly", and it holds
//! its finalizer until told to let go. Nothing it runs shares a word with
//! its key: the key is Percona XtraDB's documented
//! `delete-pxc-pods-in-order`, the operator is `quarry-agent`, its group
//! `db.quarry-lab.dev`, its Lease `08db1feb.quarry-lab.dev`. The doctor,
//! with `--apply --yes`, must leave it alone, with and without the Lease,
//! and name the pod, its ServiceAccount and the binding that lets it act.
//! Then the operator moves out of the cluster (issue 26): its Deployment
//! is deleted, no pod runs as its ServiceAccount, and the test itself,
//! outside, writes to the object with that account's token, as a
//! controller in a management cluster would. The doctor still leaves the
//! key, naming the identity and its binding. The same once the owner is
//! bound as a User instead (the test writes impersonating it). Then the
//! operator is
//! uninstalled (its RBAC and account deleted, nothing writing), and once
//! its last write is over two minutes old the same doctor argues the
//! owner dead and strips the key: the object goes.
//! Needs root and the components built by ci/setup.sh (CI runs both).

use std::{process::Output, time::Duration};

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{Namespace, Pod, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams},
};
use unstuck::wait::{self, Poll};

mod common;

use common::from_json;

const NS: &str = "it-quarry";
const KEY: &str = "delete-pxc-pods-in-order";
const OPERATOR: &str = "quarry-agent";
const CR: &str = "cluster1";
/// The owner acting from outside as a User, and its binding.
const REMOTE_USER: &str = "mgmt-quarry-operator";
const REMOTE_BINDING: &str = "quarry-agent-remote-user";

fn crs(client: &Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "db.quarry-lab.dev".into(),
        version: "v1".into(),
        api_version: "db.quarry-lab.dev/v1".into(),
        kind: "XtraCluster".into(),
        plural: "xtraclusters".into(),
    };
    Api::namespaced_with(client.clone(), NS, &ar)
}

/// The operator: a shell loop over kubectl, as its ServiceAccount, under
/// a field manager of its own as a real operator's client writes (kubectl's
/// own managers are a person's). It writes status to every deleted
/// XtraCluster, lets go of its key only
/// when the object carries `quarry-lab.dev/release=yes`, and renews its
/// Lease when `HOLD_LEASE=yes`.
const OPERATOR_SCRIPT: &str = r#"
set -u
T=/var/run/secrets/kubernetes.io/serviceaccount
k() { /opt/kubectl --server="$SERVER" --token="$(cat $T/token)" --certificate-authority=$T/ca.crt -n "$NS" "$@"; }
n=0
while true; do
  n=$((n+1))
  if [ "${HOLD_LEASE:-no}" = yes ]; then
    now=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)
    printf '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"08db1feb.quarry-lab.dev"},"spec":{"holderIdentity":"%s_6c1f","leaseDurationSeconds":15,"renewTime":"%s"}}' "$POD_NAME" "$now" | k apply --server-side --field-manager=quarry-agent-leader -f - >/dev/null
  fi
  for o in $(k get xtraclusters -o jsonpath='{range .items[?(@.metadata.deletionTimestamp)]}{.metadata.name}{" "}{end}'); do
    k patch xtracluster "$o" --field-manager=quarry-agent --subresource=status --type=merge -p "{\"status\":{\"state\":\"stopping\",\"step\":$n}}" >/dev/null
    if [ "$(k get xtracluster "$o" -o jsonpath='{.metadata.annotations.quarry-lab\.dev/release}')" = yes ]; then
      k patch xtracluster "$o" --field-manager=quarry-agent --type=json -p '[{"op":"remove","path":"/metadata/finalizers/0"}]'
    fi
  done
  sleep 3
done
"#;

async fn apply_json<K>(api: &Api<K>, v: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = from_json(v);
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create");
}

async fn install_operator(client: &Client, server: &str, kubectl: &str) {
    apply_json(
        &Api::<ServiceAccount>::namespaced(client.clone(), NS),
        serde_json::json!({"metadata": {"name": OPERATOR}}),
    )
    .await;
    apply_json(
        &Api::<ClusterRole>::all(client.clone()),
        serde_json::json!({"metadata": {"name": OPERATOR}, "rules": [
            {"apiGroups": ["db.quarry-lab.dev"], "resources": ["xtraclusters"], "verbs": ["get", "list", "watch", "update", "patch"]},
            {"apiGroups": ["db.quarry-lab.dev"], "resources": ["xtraclusters/status"], "verbs": ["get", "update", "patch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update", "patch"]}
        ]}),
    )
    .await;
    apply_json(
        &Api::<ClusterRoleBinding>::all(client.clone()),
        serde_json::json!({"metadata": {"name": OPERATOR},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": OPERATOR},
            "subjects": [{"kind": "ServiceAccount", "name": OPERATOR, "namespace": NS}]}),
    )
    .await;
    apply_json(
        &Api::<Deployment>::namespaced(client.clone(), NS),
        serde_json::json!({"metadata": {"name": OPERATOR},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": OPERATOR}},
            "template": {"metadata": {"labels": {"app": OPERATOR}},
                "spec": {"serviceAccountName": OPERATOR, "hostNetwork": true,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "agent", "image": unstuck::cluster::local::config::TEST_IMAGE,
                        "command": ["/bin/sh", "-c", OPERATOR_SCRIPT],
                        "env": [{"name": "SERVER", "value": server}, {"name": "NS", "value": NS},
                                {"name": "HOLD_LEASE", "value": "no"},
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "volumeMounts": [{"name": "kubectl", "mountPath": "/opt/kubectl", "readOnly": true}]}],
                    "volumes": [{"name": "kubectl", "hostPath": {"path": kubectl, "type": "File"}}]}}}}),
    )
    .await;
}

/// Waits until one operator pod is Running and Ready (with `lease`: its
/// env says HOLD_LEASE=yes) and returns its name.
async fn ready_operator(client: &Client, lease: bool) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    wait::until(
        "the operator pod Running and Ready",
        Duration::from_secs(180),
        Duration::from_secs(1),
        || async {
            let list = match pods
                .list(&ListParams::default().labels("app=quarry-agent"))
                .await
            {
                Ok(l) => l,
                Err(e) => return Poll::Pending(e.to_string()),
            };
            let ready: Vec<&Pod> =
                list.items
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .filter(|p| {
                        let env = p.spec.as_ref().map(|s| &s.containers[0].env);
                        let holds =
                            env.into_iter().flatten().flatten().any(|e| {
                                e.name == "HOLD_LEASE" && e.value.as_deref() == Some("yes")
                            });
                        holds == lease
                            && p.status.as_ref().is_some_and(|s| {
                                s.conditions
                                    .iter()
                                    .flatten()
                                    .any(|c| c.type_ == "Ready" && c.status == "True")
                            })
                    })
                    .collect();
            match (ready.as_slice(), list.items.len()) {
                ([one], 1) => Poll::Ready(one.metadata.name.clone().unwrap_or_default()),
                _ => Poll::Pending(format!("{} pods", list.items.len())),
            }
        },
    )
    .await
    .expect("operator ready")
}

async fn operator_pods_gone(client: &Client) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    wait::until(
        "the operator's pods gone",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || async {
            match pods
                .list(&ListParams::default().labels("app=quarry-agent"))
                .await
            {
                Ok(l) if l.items.is_empty() => Poll::Ready(()),
                Ok(l) => Poll::Pending(format!("{} pods", l.items.len())),
                Err(e) => Poll::Pending(e.to_string()),
            }
        },
    )
    .await
    .expect("pods gone");
}

/// A client that acts as ServiceAccount `NS/name` from outside the
/// cluster: the admin kubeconfig's server and CA, the account's token
/// from the TokenRequest API.
async fn token_client(client: &Client, admin_kubeconfig: &str, name: &str) -> Client {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    let request: TokenRequest = from_json(serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": [], "expirationSeconds": 3600}
    }));
    let token = Api::<ServiceAccount>::namespaced(client.clone(), NS)
        .create_subresource::<TokenRequest, TokenRequest>(
            "token",
            name,
            &PostParams::default(),
            &request,
        )
        .await
        .expect("TokenRequest")
        .status
        .expect("a token")
        .token;
    let mut kc = kube::config::Kubeconfig::read_from(admin_kubeconfig).expect("admin kubeconfig");
    for a in &mut kc.auth_infos {
        a.auth_info = Some(from_json(serde_json::json!({"token": token})));
    }
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("a config with the token");
    Client::try_from(config).expect("a client with the token")
}

/// A client that acts as User `name` from outside the cluster: the admin
/// kubeconfig, impersonating the User (RBAC then judges the User alone).
async fn user_client(admin_kubeconfig: &str, name: &str) -> Client {
    let kc = kube::config::Kubeconfig::read_from(admin_kubeconfig).expect("admin kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("the admin config");
    config.auth_info.impersonate = Some(name.to_owned());
    Client::try_from(config).expect("an impersonating client")
}

/// Two status writes by `manager`, as `client`'s identity; retried while
/// a new binding is not yet in the authorizer's cache.
async fn write_as(client: &Client, manager: &str) {
    let by = PatchParams {
        field_manager: Some(manager.into()),
        ..PatchParams::default()
    };
    for step in 1..=2 {
        wait::until(
            "a status write from outside",
            Duration::from_secs(30),
            Duration::from_secs(1),
            || async {
                match crs(client)
                    .patch_status(
                        CR,
                        &by,
                        &Patch::Merge(serde_json::json!({
                            "status": {"state": "stopping-remotely", "remoteStep": step}
                        })),
                    )
                    .await
                {
                    Ok(_) => Poll::Ready(()),
                    Err(e) => Poll::Pending(e.to_string()),
                }
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Waits until the operator has written `status.step` at least twice
/// since `after`.
async fn operator_writing(client: &Client, after: i64) -> i64 {
    let api = crs(client);
    wait::until(
        "the operator writing status to the deleted XtraCluster",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || async {
            let step = api
                .get(CR)
                .await
                .ok()
                .and_then(|o| o.data.pointer("/status/step").and_then(|v| v.as_i64()))
                .unwrap_or(0);
            if step >= after + 2 {
                Poll::Ready(step)
            } else {
                Poll::Pending(format!("status.step {step}"))
            }
        },
    )
    .await
    .expect("operator writes")
}

/// The tag of [`backup_dir`]: the test holds it as `Scratch::path(BACKUPS)`.
const BACKUPS: &str = "it-quarry-backups";

/// Where the doctor saves what it changes (the test's
/// [`common::Scratch`] of [`BACKUPS`] removes it, panic or not).
fn backup_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{BACKUPS}-{}", std::process::id()))
}

fn doctor(kubeconfig: &str) -> Output {
    let backups = backup_dir();
    common::doctor(&[
        "--kubeconfig",
        kubeconfig,
        "-n",
        NS,
        "--stuck-after",
        "5s",
        "--apply",
        "--yes",
        "-o",
        "json",
        "--backup-dir",
        backups.to_str().expect("a UTF-8 backup path"),
    ])
}

fn report(o: &Output) -> (serde_json::Value, String) {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let text = format!(
        "exit {:?}\n--- stdout\n{out}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"));
    (v, text)
}

/// The kinds of the findings about the XtraCluster, and their evidence.
fn cr_findings(v: &serde_json::Value) -> Vec<(String, String)> {
    v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| {
            f["subject"]
                .as_str()
                .is_some_and(|s| s.ends_with(&format!("/{CR}")))
        })
        .map(|f| {
            (
                f["kind"].as_str().unwrap_or_default().to_owned(),
                f["evidence"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        })
        .collect()
}

async fn still_held(client: &Client) -> bool {
    crs(client)
        .get_opt(CR)
        .await
        .expect("read the XtraCluster")
        .is_some_and(|o| o.metadata.finalizers.iter().flatten().any(|f| f == KEY))
}

/// Asserts the doctor left the key alone and named who can act.
async fn assert_left_alone(client: &Client, kubeconfig: &str, pod: &str, lease: bool) {
    let o = doctor(kubeconfig);
    let (v, text) = report(&o);
    let found = cr_findings(&v);
    assert!(!found.is_empty(), "no finding about {CR}:\n{text}");
    for (kind, evidence) in &found {
        assert!(
            kind == "WaitingOnLiveController" || kind == "UnknownFinalizerOwner",
            "{kind} for a live operator:\n{text}"
        );
        for part in [
            format!("pod {NS}/{pod} is Running and Ready"),
            format!("ServiceAccount {NS}/{OPERATOR}"),
            format!("ClusterRoleBinding {OPERATOR} -> ClusterRole {OPERATOR}"),
            // Its writes, under a manager that names nothing of the key.
            "manager \"quarry-agent\" wrote to the object".to_owned(),
        ] {
            assert!(
                evidence.contains(&part),
                "{part:?} not in the evidence:\n{text}"
            );
        }
        if lease {
            assert!(
                evidence.contains("holds the fresh lease it-quarry/08db1feb.quarry-lab.dev"),
                "the lease is not named:\n{text}"
            );
        }
    }
    assert!(
        !v["applied"].to_string().contains("RemoveFinalizers"),
        "a strip was applied to a live operator's key:\n{text}"
    );
    assert!(still_held(client).await, "the key was stripped:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_operator_named_for_nothing_is_never_stripped_and_an_uninstalled_one_is() {
    let backups = common::Scratch::path(BACKUPS);
    let name = common::cluster_name("it-owner-live");
    let cluster = common::up(&name).await;
    let client = cluster.client();
    let kc = cluster.kubeconfig().to_str().unwrap().to_owned();
    let server = {
        let text = std::fs::read_to_string(&kc).expect("kubeconfig");
        text.lines()
            .find_map(|l| l.trim().strip_prefix("server: ").map(str::to_owned))
            .expect("a server in the kubeconfig")
    };
    let kubectl = unstuck::components::locate(cluster.k8s_version())
        .expect("components")
        .kubectl();

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    apply_json(
        &crds,
        serde_json::json!({"metadata": {"name": "xtraclusters.db.quarry-lab.dev"},
            "spec": {"group": "db.quarry-lab.dev", "scope": "Namespaced",
                "names": {"plural": "xtraclusters", "singular": "xtracluster", "kind": "XtraCluster"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}),
    )
    .await;
    wait::until(
        "the XtraCluster CRD Established",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            match crds.get("xtraclusters.db.quarry-lab.dev").await {
                Ok(c)
                    if c.status
                        .iter()
                        .flat_map(|s| s.conditions.iter().flatten())
                        .any(|c| c.type_ == "Established" && c.status == "True") =>
                {
                    Poll::Ready(())
                }
                Ok(_) => Poll::Pending("not Established".into()),
                Err(e) => Poll::Pending(e.to_string()),
            }
        },
    )
    .await
    .expect("CRD");
    apply_json(
        &Api::<Namespace>::all(client.clone()),
        serde_json::json!({"metadata": {"name": NS}}),
    )
    .await;
    install_operator(&client, &server, kubectl.to_str().unwrap()).await;
    let pod = ready_operator(&client, false).await;

    let api = crs(&client);
    api.create(
        &PostParams::default(),
        &from_json(
            serde_json::json!({"apiVersion": "db.quarry-lab.dev/v1", "kind": "XtraCluster",
            "metadata": {"name": CR, "finalizers": [KEY]}, "spec": {"pxcSize": 3}}),
        ),
    )
    .await
    .expect("create the XtraCluster");
    api.delete(CR, &DeleteParams::default())
        .await
        .expect("delete");
    let step = operator_writing(&client, 0).await;
    // Past --stuck-after, with the operator still writing.
    tokio::time::sleep(Duration::from_secs(6)).await;

    // 1. Without a Lease: RBAC and the writes keep it.
    assert_left_alone(&client, &kc, &pod, false).await;

    // 2. With a Lease held by the new pod.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    deployments
        .patch(
            OPERATOR,
            &PatchParams::default(),
            &Patch::Strategic(
                serde_json::json!({"spec": {"template": {"spec": {"containers": [
                {"name": "agent", "env": [{"name": "HOLD_LEASE", "value": "yes"}]}]}}}}),
            ),
        )
        .await
        .expect("hold a lease");
    let pod = ready_operator(&client, true).await;
    operator_writing(&client, step).await;
    assert_left_alone(&client, &kc, &pod, true).await;

    // The operator really can finish by itself: that is what a strip
    // would have skipped. (Here it is told to hold on: the next phase
    // needs the object.)

    // 3. Outside the cluster: no pod runs as the operator's account, and
    // the test writes to the object with that account's token.
    deployments
        .delete(OPERATOR, &DeleteParams::foreground())
        .await
        .expect("delete the operator");
    operator_pods_gone(&client).await;
    let outside = token_client(&client, &kc, OPERATOR).await;
    write_as(&outside, "quarry-agent-remote").await;
    let o = doctor(&kc);
    let (v, text) = report(&o);
    assert!(
        still_held(&client).await,
        "stripped while acting from outside:\n{text}"
    );
    let found = cr_findings(&v);
    assert!(
        found.iter().any(
            |(k, e)| (k == "UnknownFinalizerOwner" || k == "WaitingOnLiveController")
                && e.contains(&format!("ServiceAccount {NS}/{OPERATOR}"))
                && e.contains(&format!("ClusterRoleBinding {OPERATOR}"))
                && e.contains(&format!("--assume-dead {KEY}"))
        ),
        "the identity acting from outside is not named:\n{text}"
    );
    assert_eq!(o.status.code(), Some(7), "still stuck:\n{text}");

    // 3b. The same owner bound as a User (a management cluster's
    // controller with a certificate of its own): the account's binding
    // goes, a User's takes its place, and the test writes as that User
    // (impersonated: the API server checks the User's rights, not the
    // admin's).
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    bindings
        .delete(OPERATOR, &DeleteParams::default())
        .await
        .expect("delete the account's binding");
    apply_json(
        &bindings,
        serde_json::json!({"metadata": {"name": REMOTE_BINDING},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": OPERATOR},
            "subjects": [{"kind": "User", "name": REMOTE_USER, "apiGroup": "rbac.authorization.k8s.io"}]}),
    )
    .await;
    let as_user = user_client(&kc, REMOTE_USER).await;
    write_as(&as_user, "quarry-agent-mgmt").await;
    let o = doctor(&kc);
    let (v, text) = report(&o);
    assert!(
        still_held(&client).await,
        "stripped while a User acts from outside:\n{text}"
    );
    assert!(
        cr_findings(&v)
            .iter()
            .any(
                |(k, e)| (k == "UnknownFinalizerOwner" || k == "WaitingOnLiveController")
                    && e.contains(&format!("User {REMOTE_USER}"))
                    && e.contains(&format!("ClusterRoleBinding {REMOTE_BINDING}"))
                    && e.contains(&format!("--assume-dead {KEY}"))
            ),
        "the User acting from outside is not named with its binding:\n{text}"
    );
    assert_eq!(o.status.code(), Some(7), "still stuck:\n{text}");

    // 4. Uninstalled: its RBAC and account deleted, nothing writing.
    bindings
        .delete(REMOTE_BINDING, &DeleteParams::default())
        .await
        .expect("delete the User's binding");
    Api::<ClusterRole>::all(client.clone())
        .delete(OPERATOR, &DeleteParams::default())
        .await
        .expect("delete the role");
    Api::<ServiceAccount>::namespaced(client.clone(), NS)
        .delete(OPERATOR, &DeleteParams::default())
        .await
        .expect("delete the service account");
    // Its last write must be older than the two minutes that count as
    // "at work now"; until then the doctor still leaves it.
    let o = doctor(&kc);
    let (_, text) = report(&o);
    assert!(
        still_held(&client).await,
        "stripped right after the last write:\n{text}"
    );
    tokio::time::sleep(Duration::from_secs(125)).await;
    let o = doctor(&kc);
    let (v, text) = report(&o);
    let found = cr_findings(&v);
    assert!(
        found
            .iter()
            .any(|(k, e)| k == "OrphanFinalizer"
                && e.contains("no pod or workload runs as any of them")),
        "the uninstalled operator's key is not argued dead:\n{text}"
    );
    wait::until(
        "the XtraCluster gone",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || async {
            match api.get_opt(CR).await {
                Ok(None) => Poll::Ready(()),
                Ok(Some(o)) => Poll::Pending(format!("finalizers {:?}", o.metadata.finalizers)),
                Err(e) => Poll::Pending(e.to_string()),
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(o.status.code(), Some(0), "{text}");
    // It backed the object up before the strip, and only then.
    let saved: Vec<String> = std::fs::read_dir(&backups)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        saved.len() == 1 && saved[0].starts_with(&format!("xtracluster.{NS}.{CR}.")),
        "{saved:?}"
    );

    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "{report}");
    assert!(unstuck::cluster::local::leftovers(&layout).is_empty());
}

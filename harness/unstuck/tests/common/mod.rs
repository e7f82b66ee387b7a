//! What the integration tests that bring up real local clusters share.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use unstuck::cluster::{
    local::{LocalCluster, UpOptions},
    name::{MAX_NAME_LEN, validate_name},
};
use unstuck::wait::{self, Poll, WaitTimeout};

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

/// Options for local cluster `name` whose reaper is this test build's
/// `unstuck`: a test process that dies takes its cluster with it.
#[allow(dead_code)]
pub fn up_options(name: &str) -> UpOptions {
    let mut opts = UpOptions::new(name);
    opts.reaper = Some(env!("CARGO_BIN_EXE_unstuck").into());
    opts
}

/// Brings up local cluster `name` (see [`up_options`]), or panics.
#[allow(dead_code)]
pub async fn up(name: &str) -> LocalCluster {
    LocalCluster::up(up_options(name))
        .await
        .expect("cluster up")
}

/// Creates namespace `name`, or panics.
#[allow(dead_code)]
pub async fn create_namespace(client: &kube::Client, name: &str) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &from_json(serde_json::json!({"metadata": {"name": name}})),
        )
        .await
        .expect("namespace");
}

/// ConfigMap `namespace/name` created with finalizer `key` (which nothing
/// serves) and deleted: it stays Terminating until the finalizer goes.
#[allow(dead_code)]
pub async fn held_configmap(client: &kube::Client, namespace: &str, name: &str, key: &str) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    cms.create(
        &PostParams::default(),
        &from_json(serde_json::json!({"metadata": {"name": name, "finalizers": [key]}})),
    )
    .await
    .expect("configmap");
    cms.delete(name, &DeleteParams::default())
        .await
        .expect("delete configmap");
}

/// Waits (at most 90 s) until pod `name` of `pods` is Running.
#[allow(dead_code)]
pub async fn wait_running(pods: &Api<Pod>, name: &str) -> Pod {
    wait::until(
        format!("pod {name} to be Running"),
        Duration::from_secs(90),
        Duration::from_millis(500),
        || async move {
            match pods.get(name).await {
                Ok(p) if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") => {
                    Poll::Ready(p)
                }
                other => Poll::Pending(format!(
                    "{:?}",
                    other.map(|p| p.status.and_then(|s| s.phase))
                )),
            }
        },
    )
    .await
    .unwrap()
}

/// Waits until object `name` of `api` is gone (a GET finds nothing),
/// polling every `interval` for at most `within`.
#[allow(dead_code)]
pub async fn wait_gone<K>(
    api: &Api<K>,
    name: &str,
    within: Duration,
    interval: Duration,
) -> Result<(), WaitTimeout>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    wait::until(
        format!("{} {name} to be gone", K::kind(&Default::default())),
        within,
        interval,
        || async move {
            match api.get_opt(name).await {
                Ok(None) => Poll::Ready(()),
                Ok(Some(_)) => Poll::Pending("still there".into()),
                Err(e) => Poll::Pending(e.to_string()),
            }
        },
    )
    .await
}

/// An object from its JSON, for the objects tests create.
#[allow(dead_code)]
/// Creates `default/<name>` with an emptyDir `data` at /data and a
/// ConfigMap volume `cfg` mounted by subPath, and waits until it runs.
pub async fn running_pod_with_volumes(client: &kube::Client, name: &str) -> Pod {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = from_json(serde_json::json!({
        "metadata": {"name": format!("{name}-cfg")}, "data": {"x": "1"}
    }));
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = from_json(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": unstuck::cluster::local::config::TEST_IMAGE, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                             {"name": "cfg", "mountPath": "/etc/cfg/x", "subPath": "x"}]}],
            "volumes": [{"name": "data", "emptyDir": {}},
                        {"name": "cfg", "configMap": {"name": format!("{name}-cfg")}}]
        }
    }));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    wait_running(&pods, name).await
}

#[allow(dead_code)]
/// Makes a cluster unstuck brought up count as someone else's: its
/// marker, copied from another cluster, names a kube-system UID this one
/// does not have. Returns the kubeconfig's context.
pub async fn make_it_someone_elses(client: &kube::Client, kubeconfig: &std::path::Path) -> String {
    let (context, server) =
        unstuck::cluster::identity::kubeconfig_context(kubeconfig).expect("kubeconfig");
    let (target, marked) =
        unstuck::cluster::identity::identify(client, context.clone(), server.clone())
            .await
            .expect("identify");
    assert!(
        marked,
        "no valid marker on a cluster unstuck brought up: {target}"
    );
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), unstuck::cluster::identity::MARKER_NAMESPACE);
    cms.patch(
        unstuck::cluster::identity::MARKER_NAME,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"data": {unstuck::cluster::identity::UID_KEY: "6f0c1a52-0000-4000-8000-000000000000"}})),
    )
    .await
    .expect("giving the marker another cluster's UID");
    let (_, marked) = unstuck::cluster::identity::identify(client, context.clone(), server)
        .await
        .expect("identify");
    assert!(!marked, "a marker with another cluster's UID counted");
    context
}

#[allow(dead_code)]
pub fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("a valid object")
}

/// Runs the `unstuck` binary built for these tests with `args`: no
/// terminal on stdin (so it never asks), warnings only in its log.
#[allow(dead_code)]
pub fn unstuck(args: &[&str]) -> std::process::Output {
    unstuck_env::<&str>(args, &[])
}

/// [`unstuck`] with `env` set on top (an `UNSTUCK_LOG` there wins; a
/// state directory of the test's own, say).
#[allow(dead_code)]
pub fn unstuck_env<V: AsRef<std::ffi::OsStr>>(
    args: &[&str],
    env: &[(&str, V)],
) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_unstuck"));
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .env("UNSTUCK_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("running unstuck")
}

/// Starts `unstuck ARGS` with `env` set and returns the child and a
/// channel of its stdout and stderr lines (each echoed to the test's
/// stderr), read to the end so it never writes to a closed pipe.
#[allow(dead_code)]
pub fn spawn_unstuck(
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_unstuck"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("unstuck starts");
    let (tx, rx) = std::sync::mpsc::channel();
    for pipe in [
        Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                eprintln!("  | {line}");
                // The test may have stopped listening; the line was echoed.
                tx.send(line).ok();
            }
        });
    }
    (child, rx)
}

/// Waits for a line containing `needle` from [`spawn_unstuck`]'s channel,
/// or panics naming what it waited for.
#[allow(dead_code)]
pub fn wait_for_line(
    rx: &std::sync::mpsc::Receiver<String>,
    needle: &str,
    limit: std::time::Duration,
) {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if let Ok(line) = rx.recv_timeout(std::time::Duration::from_secs(1))
            && line.contains(needle)
        {
            return;
        }
    }
    panic!("no line with {needle:?} within {limit:?}");
}

/// `unstuck doctor ARGS`, as [`unstuck`].
#[allow(dead_code)]
pub fn doctor(args: &[&str]) -> std::process::Output {
    doctor_env(args, &[])
}

/// `unstuck doctor ARGS`, as [`unstuck_env`].
#[allow(dead_code)]
pub fn doctor_env(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut all = vec!["doctor"];
    all.extend_from_slice(args);
    unstuck_env(&all, env)
}

/// Exit code, stdout and stderr of a run, for an assertion's message.
#[allow(dead_code)]
pub fn output_text(o: &std::process::Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A run's stdout as JSON (`-o json`), or a panic that shows the run.
#[allow(dead_code)]
pub fn stdout_json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("JSON report: {e}\n{}", output_text(o)))
}

/// What Docker still holds of kind cluster `name`: its containers and
/// its network.
#[allow(dead_code)]
pub async fn kind_leftovers(name: &str) -> Vec<String> {
    use unstuck::{cluster::kind, docker::Docker};
    let docker = Docker::default();
    let mut left: Vec<String> = docker
        .containers_labelled(kind::CLUSTER_LABEL, name)
        .await
        .expect("docker ps answers")
        .into_iter()
        .map(|c| format!("container {c}"))
        .collect();
    if docker
        .network_exists(&kind::network_name(name))
        .await
        .expect("docker network ls answers")
    {
        left.push(format!("network {}", kind::network_name(name)));
    }
    left
}

/// The repository's root (where `scenarios/` and `fixtures/` are).
#[allow(dead_code)]
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
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

/// `docker ARGS`'s stdout, or a panic with its stderr.
#[allow(dead_code)]
pub fn docker(args: &[&str]) -> String {
    let out = std::process::Command::new("docker")
        .args(args)
        .output()
        .expect("docker runs");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Held by every test that sweeps stale containers (`cluster gc`, the
/// sweep itself) or says what a sweep of its own removed: test binaries
/// run side by side, and one binary's `cluster gc` removes another's
/// deliberately killed run before that one's gc can name it (CI of
/// 2026-12-07: "gc did not say container ..." with nothing left). A
/// `flock`, so it holds across threads and processes alike.
#[allow(dead_code)]
pub fn sweep_lock() -> std::fs::File {
    let path = std::env::temp_dir().join("unstuck-test-sweep.lock");
    unstuck::host::lock_file(&path).unwrap_or_else(|e| panic!("locking {}: {e}", path.display()))
}

/// The containers and networks labelled `label=value`, asked of the
/// engine directly (not through the code under test).
#[allow(dead_code)]
pub fn labelled(label: &str, value: &str) -> Vec<String> {
    let filter = format!("label={label}={value}");
    let mut left: Vec<String> =
        docker(&["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"])
            .lines()
            .map(|n| format!("container {n}"))
            .collect();
    left.extend(
        docker(&[
            "network",
            "ls",
            "--filter",
            &filter,
            "--format",
            "{{.Name}}",
        ])
        .lines()
        .map(|n| format!("network {n}")),
    );
    left
}

/// A scenarios folder of this test process's own (`unstuck-<tag>-<pid>`
/// under the temp dir, made afresh) holding links to `files` of the
/// repository's `scenarios/`.
#[allow(dead_code)]
pub fn scenarios_folder(tag: &str, files: &[&str]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("unstuck-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the scenarios folder");
    for f in files {
        std::os::unix::fs::symlink(repo_root().join("scenarios").join(f), dir.join(f))
            .expect("a link to a scenario");
    }
    dir
}

/// `unstuck run` of the scenarios in `scenarios` with the repository's
/// fixtures, reports under `out`, as [`spawn_unstuck`] starts it.
#[allow(dead_code)]
pub fn spawn_run(
    scenarios: &std::path::Path,
    out: &std::path::Path,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    spawn_run_env(scenarios, out, &[])
}

/// [`spawn_run`] with `env` set on top (`UNSTUCK_LOG`, say).
#[allow(dead_code)]
pub fn spawn_run_env(
    scenarios: &std::path::Path,
    out: &std::path::Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let fixtures = repo_root().join("fixtures");
    spawn_unstuck(
        &[
            "run",
            "--scenarios",
            scenarios.to_str().expect("a UTF-8 path"),
            "--fixtures",
            fixtures.to_str().expect("a UTF-8 path"),
            "--out",
            out.to_str().expect("a UTF-8 path"),
        ],
        env,
    )
}

/// The doctor's documented JSON schema, `docs/doctor-report.schema.json`.
#[allow(dead_code)]
pub fn doctor_schema() -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/doctor-report.schema.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Where `report` breaks the doctor's documented schema (empty: it holds).
#[allow(dead_code)]
pub fn schema_errors(report: &serde_json::Value) -> Vec<String> {
    let validator = jsonschema::validator_for(&doctor_schema()).expect("the schema compiles");
    validator
        .iter_errors(report)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

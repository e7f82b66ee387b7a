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
/// under the temp dir, made afresh, a [`Scratch`] that removes it)
/// holding links to `files` of the repository's `scenarios/`.
#[allow(dead_code)]
pub fn scenarios_folder(tag: &str, files: &[&str]) -> Scratch {
    let dir = Scratch::dir(&format!("unstuck-{tag}"));
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

/// A file or directory of this test process's own under the temp dir,
/// `<temp_dir>/<tag>-<pid>`, removed when the guard is dropped: at the
/// end of the test, and also when an assertion panics half-way (a
/// trailing `remove_dir_all` never runs then, and the temp dir fills up
/// with dead tests' folders). Hold it in a named variable for the whole
/// test (not `_`, which drops it at once), declared before anything that
/// still uses the path when it is dropped. Reads as a [`Path`].
#[allow(dead_code)]
pub struct Scratch {
    path: std::path::PathBuf,
}

#[allow(dead_code)]
impl Scratch {
    /// An empty directory `<temp_dir>/<tag>-<pid>`, made afresh: whatever
    /// an earlier process of the same id left there is removed first.
    pub fn dir(tag: &str) -> Scratch {
        let scratch = Scratch::path(tag);
        std::fs::create_dir_all(&scratch.path)
            .unwrap_or_else(|e| panic!("creating {}: {e}", scratch.path.display()));
        scratch
    }

    /// The path `<temp_dir>/<tag>-<pid>` only, for a file or a directory
    /// the test or a command it runs makes itself; whatever an earlier
    /// process of the same id left there is removed first.
    pub fn path(tag: &str) -> Scratch {
        let scratch = Scratch {
            path: std::env::temp_dir().join(format!("{tag}-{}", std::process::id())),
        };
        scratch.remove();
        scratch
    }

    /// `<temp_dir>/<tag>-<pid>.<ext>` beside this one, reserved as
    /// [`Scratch::path`] does: a run's `--out` beside its scenarios
    /// folder, say.
    pub fn sibling(&self, ext: &str) -> Scratch {
        let scratch = Scratch {
            path: self.path.with_extension(ext),
        };
        scratch.remove();
        scratch
    }

    /// The path (also what the guard derefs to).
    pub fn as_path(&self) -> &std::path::Path {
        &self.path
    }

    /// Removes the file or directory tree, if there is one; a failure is
    /// said on stderr (a panic here, in a test already panicking, would
    /// abort the whole test binary).
    fn remove(&self) {
        let removed = match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&self.path),
            Ok(_) => std::fs::remove_file(&self.path),
            Err(e) => Err(e),
        };
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                eprintln!("removing {}: {e}", self.path.display());
            }
            _ => {}
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.remove();
    }
}

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.path
    }
}

impl AsRef<std::path::Path> for Scratch {
    fn as_ref(&self) -> &std::path::Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

/// Copies the directory tree `from` to `evidence/<name>` in cargo's
/// scratch directory of this package (`CARGO_TARGET_TMPDIR`, under the
/// target dir, not the temp dir), replacing an older copy, and returns
/// where. A failed run's folder is what a person needs to see why, and
/// the test's [`Scratch`] removes the original when the test ends, pass
/// or panic: keep it before the assertion that fails. Best effort: what
/// cannot be copied is said on stderr and the rest is still copied (the
/// caller is about to fail with a message of its own).
#[allow(dead_code)]
pub fn keep_evidence(from: &std::path::Path, name: &str) -> std::path::PathBuf {
    let to = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("evidence")
        .join(name);
    match std::fs::remove_dir_all(&to) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            eprintln!("removing the older evidence {}: {e}", to.display());
        }
        _ => {}
    }
    let mut problems = Vec::new();
    copy_tree(from, &to, &mut problems);
    for p in problems {
        eprintln!("keeping the evidence of {}: {p}", from.display());
    }
    to
}

/// Copies directory `from` into `to` (made if missing), recursively,
/// symbolic links as links; what fails is added to `problems` and the
/// rest still copied.
fn copy_tree(from: &std::path::Path, to: &std::path::Path, problems: &mut Vec<String>) {
    if let Err(e) = std::fs::create_dir_all(to) {
        problems.push(format!("creating {}: {e}", to.display()));
        return;
    }
    let entries = match std::fs::read_dir(from) {
        Ok(d) => d,
        Err(e) => {
            problems.push(format!("reading {}: {e}", from.display()));
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                problems.push(format!("reading {}: {e}", from.display()));
                continue;
            }
        };
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let copied = match entry.file_type() {
            Ok(t) if t.is_dir() => {
                copy_tree(&src, &dst, problems);
                Ok(())
            }
            Ok(t) if t.is_symlink() => {
                std::fs::read_link(&src).and_then(|target| std::os::unix::fs::symlink(target, &dst))
            }
            Ok(_) => std::fs::copy(&src, &dst).map(drop),
            Err(e) => Err(e),
        };
        if let Err(e) = copied {
            problems.push(format!("copying {}: {e}", src.display()));
        }
    }
}

/// An assertion's message for an `unstuck run` that failed, whose run
/// folder (or folders) is under `out`, its `--out`: each scenario of its
/// reports that did not pass, by name with its outcome's reason (see
/// [`scenario_failure`]), then where `out` is kept: it is copied first,
/// as evidence `name` ([`keep_evidence`]). Call it only for a failed
/// run, before the assertion: it always copies.
#[allow(dead_code)]
pub fn run_failure(out: &std::path::Path, name: &str) -> String {
    let kept = keep_evidence(out, name);
    let mut folders: Vec<std::path::PathBuf> = std::fs::read_dir(out)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    folders.sort();
    let mut lines = Vec::new();
    for report in folders
        .iter()
        .map(|f| f.join("report.json"))
        .filter(|r| r.exists())
    {
        let read = std::fs::read_to_string(&report)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                serde_json::from_str::<unstuck::report::RunReport>(&text).map_err(|e| e.to_string())
            });
        match read {
            Ok(run) => lines.extend(
                run.scenarios
                    .iter()
                    .filter(|s| !s.passed())
                    .map(scenario_failure),
            ),
            Err(e) => lines.push(format!("  {}: {e}", report.display())),
        }
    }
    if lines.is_empty() {
        lines.push(format!(
            "  no report.json under {} names a scenario that did not pass",
            out.display()
        ));
    }
    format!("{}\nkept in {}", lines.join("\n"), kept.display())
}

/// `  <scenario> (failed at step 3): <reason>`, for a scenario that did
/// not pass; the reason's further lines indented under it.
#[allow(dead_code)]
pub fn scenario_failure(s: &unstuck::report::ScenarioReport) -> String {
    use unstuck::report::Outcome;
    let verdict = match &s.outcome {
        Outcome::Passed => "passed".to_string(),
        Outcome::Failed { step, .. } => format!("failed at step {step}"),
        Outcome::Interrupted { step, .. } => format!("interrupted at step {step}"),
    };
    let reason = s.outcome.reason().unwrap_or_default();
    format!(
        "  {} ({verdict}): {}",
        s.name(),
        reason.replace('\n', "\n      ")
    )
}

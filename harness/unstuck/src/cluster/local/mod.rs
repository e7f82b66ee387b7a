//! The `local` provider: a single-node cluster of real Kubernetes
//! components (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler, containerd, kubelet) run as processes on this machine,
//! with no Docker and no registry.

pub mod config;
pub mod layout;
mod network;
pub mod pki;
pub mod preflight;
pub mod process;
pub mod state;
pub mod supervisor;
pub mod teardown;

use std::{
    fs,
    io::{Read, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Stdio},
    time::{Duration, Instant},
};

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use kube::{Api, Client, api::PostParams};

use self::{
    config::ComponentCommand,
    preflight::PreflightError,
    state::{ComponentProcess, ProcessRef, StateError},
    supervisor::{ExitLog, Supervisor},
};
pub use self::{
    layout::Layout,
    process::Lifetime,
    state::ClusterState,
    teardown::{TeardownReport, leftovers},
};
use crate::{
    cluster::readiness,
    components::{self, Binaries, ComponentsError},
    exec::{Cmd, RunError},
    wait::{self, Poll, WaitTimeout},
};

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("{0}")]
    Name(String),
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    #[error(transparent)]
    Components(#[from] ComponentsError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(
        "cluster '{name}' already exists ({dir}); use it with --kubeconfig {dir}/admin.kubeconfig, or remove it with `unstuck cluster down {name}`"
    )]
    Exists { name: String, dir: PathBuf },
    #[error(
        "no local cluster named '{0}'; `unstuck cluster list` shows the clusters on this machine"
    )]
    NotFound(String),
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    #[error(transparent)]
    Process(#[from] process::ProcessError),
    #[error(transparent)]
    Command(#[from] RunError),
    #[error("{what} failed: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{component} exited during start-up ({status}); last lines of {log}:\n{tail}")]
    ComponentExited {
        component: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("{source}\n  component logs: {logs}")]
    Timeout {
        #[source]
        source: WaitTimeout,
        logs: PathBuf,
    },
    #[error("failed to build a client from {path}: {message}")]
    Client { path: PathBuf, message: String },
    #[error("kubernetes API call failed while {what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LocalError {
    let what = what.into();
    move |source| LocalError::Io { what, source }
}

/// How to bring a local cluster up.
#[derive(Clone, Debug)]
pub struct UpOptions {
    pub name: String,
    pub k8s_version: String,
    pub lifetime: Lifetime,
    /// Program to run as the cluster's reaper (the `unstuck` binary): it
    /// outlives a crashed harness and tears the cluster down. Only for
    /// [`Lifetime::Owned`] clusters.
    pub reaper: Option<PathBuf>,
    pub slot: Option<u8>,
    pub timeout: Duration,
}

impl UpOptions {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            k8s_version: std::env::var("UNSTUCK_K8S_VERSION")
                .unwrap_or_else(|_| components::DEFAULT_K8S_VERSION.into()),
            lifetime: Lifetime::Owned,
            reaper: None,
            slot: None,
            timeout: Duration::from_secs(240),
        }
    }
}

/// How long each phase of `up` took.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct UpTimings {
    pub control_plane_ready: Duration,
    pub node_ready: Duration,
    pub total: Duration,
}

/// A running local cluster, owned by this process.
pub struct LocalCluster {
    state: ClusterState,
    client: Client,
    bins: Binaries,
    /// The node's components (containerd, kubelet), reaped at `down`.
    children: Vec<Child>,
    /// Restarts the control plane's components when they exit.
    supervisor: Option<Supervisor>,
    reaper: Option<(Child, ChildStdin)>,
    pub timings: UpTimings,
}

impl LocalCluster {
    /// Brings a cluster up and waits for its node to be Ready. On any
    /// failure everything already started is torn down again.
    ///
    /// With [`Lifetime::Owned`], call this from the thread that lives as
    /// long as the cluster (the main thread): components die with it.
    pub async fn up(opts: UpOptions) -> Result<Self, LocalError> {
        layout::validate_name(&opts.name).map_err(LocalError::Name)?;
        preflight::check_root()?;
        preflight::check_cgroups()?;
        preflight::check_inotify()?;
        let bins = components::locate(&opts.k8s_version)?;
        let root = state::state_root();
        let started = Instant::now();

        let layout = {
            let _lock = state::lock_root(&root)?;
            sweep_stale_locked(&root).await;
            let dir = root.join(&opts.name);
            if dir.exists() {
                return Err(LocalError::Exists {
                    name: opts.name.clone(),
                    dir,
                });
            }
            let used: Vec<u8> = state::list(&root)
                .into_iter()
                .filter_map(|(_, s)| s.ok().flatten())
                .map(|s| s.layout.slot)
                .collect();
            let slot = match opts.slot {
                Some(s) => s,
                None => state::free_slot(&used)?,
            };
            let layout = Layout::new(&opts.name, slot, &root);
            preflight::check_ports(&layout)?;
            fs::create_dir_all(layout.logs_dir())
                .map_err(io(format!("creating {}", layout.dir.display())))?;
            let owner = match opts.lifetime {
                Lifetime::Owned => ProcessRef::of(std::process::id() as i32),
                Lifetime::Detached => None,
            };
            ClusterState {
                layout: layout.clone(),
                k8s_version: opts.k8s_version.clone(),
                created_at: k8s_openapi::jiff::Timestamp::now().to_string(),
                owner,
                components: Vec::new(),
            }
            .save()?;
            layout
        };

        let state = ClusterState::load(&layout.dir)?.expect("state just saved");
        let mut starting = Starting {
            state,
            bins: bins.clone(),
            children: Vec::new(),
            reaper: None,
        };
        if let (Lifetime::Owned, Some(program)) = (opts.lifetime, &opts.reaper) {
            starting.reaper = Some(spawn_reaper(program, &layout.dir)?);
        }
        match starting.run(opts.lifetime, opts.timeout, started).await {
            Ok((client, timings)) => {
                let (supervised, children): (Vec<_>, Vec<_>) =
                    std::mem::take(&mut starting.children)
                        .into_iter()
                        .partition(|(name, _)| supervisor::SUPERVISED.contains(&name.as_str()));
                let supervisor = Supervisor::start(
                    layout.clone(),
                    config::component_commands(&layout, &bins),
                    supervised,
                    opts.lifetime,
                );
                Ok(LocalCluster {
                    state: starting.state,
                    client,
                    bins,
                    children: children.into_iter().map(|(_, c)| c).collect(),
                    supervisor: Some(supervisor),
                    reaper: starting.reaper.take(),
                    timings,
                })
            }
            Err(e) => {
                let report = teardown::teardown(&layout.dir).await;
                tracing::warn!("start-up of '{}' failed; cleaned up: {report}", layout.name);
                starting.reap_children();
                Err(e)
            }
        }
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }
    pub fn layout(&self) -> &Layout {
        &self.state.layout
    }
    pub fn kubeconfig(&self) -> PathBuf {
        self.state.layout.admin_kubeconfig()
    }
    pub fn binaries(&self) -> &Binaries {
        &self.bins
    }
    pub fn k8s_version(&self) -> &str {
        &self.state.k8s_version
    }
    /// The control-plane components that exited while the cluster ran
    /// (each restarted by its supervisor), as they happen.
    pub fn component_exits(&self) -> ExitLog {
        self.supervisor
            .as_ref()
            .map(Supervisor::exits)
            .unwrap_or_default()
    }

    /// Stops everything and removes every process, mount, link, cgroup and
    /// directory the cluster made.
    pub async fn down(mut self) -> TeardownReport {
        // Supervision ends first, so nothing the teardown stops comes back.
        if let Some(supervisor) = self.supervisor.take() {
            self.children.extend(supervisor.stop());
        }
        let report = teardown::teardown(&self.state.layout.dir).await;
        for c in &mut self.children {
            let _ = c.wait();
        }
        if let Some((mut child, stdin)) = self.reaper.take() {
            // The directory is gone, so the reaper finds nothing left to do.
            drop(stdin);
            let _ = child.wait();
        }
        report
    }
}

/// A cluster part-way through `up`: what is started so far.
struct Starting {
    state: ClusterState,
    bins: Binaries,
    children: Vec<(String, Child)>,
    reaper: Option<(Child, ChildStdin)>,
}

impl Starting {
    async fn run(
        &mut self,
        lifetime: Lifetime,
        timeout: Duration,
        started: Instant,
    ) -> Result<(Client, UpTimings), LocalError> {
        let l = self.state.layout.clone();
        let deadline = started + timeout;
        let remaining = || deadline.saturating_duration_since(Instant::now());
        write_configs(&l)?;
        network::create_host_link(&self.bins.ip, &l).await?;
        make_cgroup_root(&l)?;

        let commands = config::component_commands(&l, &self.bins);
        let cmd = |name: &str| {
            commands
                .iter()
                .find(|c| c.name == name)
                .expect("known component")
                .clone()
        };

        self.start(&cmd("etcd"), lifetime)?;
        let etcd_port = l.etcd_client_port();
        self.wait_for(
            "etcd to report healthy",
            remaining(),
            "etcd",
            || async move {
                match http_get_local(etcd_port, "/health").await {
                    Ok(body) if body.contains("\"health\":\"true\"") => Poll::Ready(()),
                    Ok(body) => Poll::Pending(body),
                    Err(e) => Poll::Pending(e.to_string()),
                }
            },
        )
        .await?;

        self.start(&cmd("kube-apiserver"), lifetime)?;
        let client = client_for(&l.admin_kubeconfig()).await?;
        let c = client.clone();
        self.wait_for(
            "kube-apiserver /readyz",
            remaining(),
            "kube-apiserver",
            move || {
                let c = c.clone();
                async move {
                    let req = http::Request::get("/readyz")
                        .body(Vec::new())
                        .expect("static request");
                    match c.request_text(req).await {
                        Ok(body) if body.trim() == "ok" => Poll::Ready(()),
                        Ok(body) => Poll::Pending(body),
                        Err(e) => Poll::Pending(e.to_string()),
                    }
                }
            },
        )
        .await?;
        bind_apiserver_to_kubelet_api(&client).await?;
        self.start(&cmd("kube-controller-manager"), lifetime)?;
        self.start(&cmd("kube-scheduler"), lifetime)?;
        let control_plane_ready = started.elapsed();

        self.start(&cmd("containerd"), lifetime)?;
        let sock = l.containerd_socket();
        let ctr = self.bins.ctr.clone();
        self.wait_for(
            "containerd to answer on its socket",
            remaining(),
            "containerd",
            || {
                let (sock, ctr) = (sock.clone(), ctr.clone());
                async move {
                    match Cmd::new(&ctr)
                        .arg("--address")
                        .arg(&sock)
                        .arg("version")
                        .timeout(Duration::from_secs(5))
                        .output()
                        .await
                    {
                        Ok(_) => Poll::Ready(()),
                        Err(e) => Poll::Pending(e.to_string()),
                    }
                }
            },
        )
        .await?;
        for image in &self.bins.images {
            Cmd::new(&self.bins.ctr)
                .arg("--address")
                .arg(&sock)
                .args(["-n", "k8s.io", "images", "import"])
                .arg(image)
                .timeout(Duration::from_secs(120))
                .output()
                .await?;
        }

        self.start(&cmd("kubelet"), lifetime)?;
        let node_name = l.node_name();
        self.wait_for(
            &format!("node {node_name} to be Ready"),
            remaining(),
            "kubelet",
            || readiness::node_ready(&client, &node_name),
        )
        .await?;
        self.wait_for(
            "the default ServiceAccount (pods are refused without it)",
            remaining(),
            "kube-controller-manager",
            || readiness::default_service_account(&client),
        )
        .await?;
        // The mark that lets `unstuck run` know this cluster is its own.
        self.wait_for(
            "the marker kube-system/unstuck-cluster",
            remaining(),
            "kube-apiserver",
            || readiness::marked(&client),
        )
        .await?;
        let total = started.elapsed();
        Ok((
            client,
            UpTimings {
                control_plane_ready,
                node_ready: total,
                total,
            },
        ))
    }

    fn start(&mut self, cmd: &ComponentCommand, lifetime: Lifetime) -> Result<(), LocalError> {
        let l = &self.state.layout;
        let child = process::spawn(cmd, &l.log_file(cmd.name), lifetime)?;
        let pid = child.id() as i32;
        self.children.push((cmd.name.to_string(), child));
        let process = ProcessRef::of(pid).ok_or_else(|| self.exited(cmd.name))?;
        self.state.components.push(ComponentProcess {
            name: cmd.name.to_string(),
            process,
        });
        self.state.save()?;
        Ok(())
    }

    /// Waits, failing early with the log's tail if the component `watch` died.
    async fn wait_for<F, Fut>(
        &mut self,
        what: &str,
        timeout: Duration,
        watch: &str,
        mut check: F,
    ) -> Result<(), LocalError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Poll<()>>,
    {
        let watched = self
            .state
            .components
            .iter()
            .find(|c| c.name == watch)
            .map(|c| c.process.clone());
        let result = wait::until(what, timeout, Duration::from_millis(250), || {
            let dead = watched.as_ref().is_some_and(|p| !p.is_alive());
            let fut = check();
            async move {
                if dead {
                    return Poll::Ready(Err(()));
                }
                match fut.await {
                    Poll::Ready(()) => Poll::Ready(Ok(())),
                    Poll::Pending(s) => Poll::Pending(s),
                }
            }
        })
        .await;
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(())) => Err(self.exited(watch)),
            Err(source) => Err(LocalError::Timeout {
                source,
                logs: self.state.layout.logs_dir(),
            }),
        }
    }

    fn exited(&mut self, component: &str) -> LocalError {
        let log = self.state.layout.log_file(component);
        let status = self
            .children
            .iter_mut()
            .filter(|(name, _)| name == component)
            .filter_map(|(_, c)| c.try_wait().ok().flatten())
            .map(|s| s.to_string())
            .next()
            .unwrap_or_else(|| "exited".into());
        LocalError::ComponentExited {
            component: component.to_string(),
            status,
            tail: process::log_tail(&log, 15),
            log,
        }
    }

    fn reap_children(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some((mut child, stdin)) = self.reaper.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

fn write_configs(l: &Layout) -> Result<(), LocalError> {
    let pki = pki::generate(&l.pki_dir(), &l.node_name(), l.node_ip(), l.service_ip())?;
    let server = config::server_url(l);
    for id in pki::client_identities(&l.node_name()) {
        let text = config::kubeconfig(
            &server,
            &pki.ca_cert(),
            &pki.path(&format!("{}.crt", id.file)),
            &pki.path(&format!("{}.key", id.file)),
            &format!("unstuck-{}", l.name),
        );
        fs::write(l.kubeconfig(id.file), text).map_err(io("writing kubeconfigs"))?;
    }
    let w = |path: PathBuf, text: String| {
        fs::write(&path, text).map_err(io(format!("writing {}", path.display())))
    };
    fs::create_dir_all(l.cni_conf_dir()).map_err(io("creating the CNI config dir"))?;
    w(l.dir.join("containerd.toml"), config::containerd_toml(l))?;
    w(
        l.cni_conf_dir().join(config::CNI_CONFLIST_NAME),
        config::cni_conflist(l),
    )?;
    w(
        l.dir.join("kubelet.yaml"),
        config::kubelet_yaml(l, &pki.ca_cert()),
    )?;
    Ok(())
}

/// Creates the cluster's cgroup in every v1 hierarchy. A new cpuset group
/// starts with no CPUs or memory nodes, so those are copied from the root.
fn make_cgroup_root(l: &Layout) -> Result<(), LocalError> {
    for h in crate::host::cgroup_v1_hierarchies() {
        let dir = h.join(l.cgroup_root().trim_start_matches('/'));
        fs::create_dir_all(&dir).map_err(io(format!("creating cgroup {}", dir.display())))?;
        for f in ["cpuset.cpus", "cpuset.mems"] {
            if let Ok(v) = fs::read_to_string(h.join(f)) {
                fs::write(dir.join(f), v.trim())
                    .map_err(io(format!("writing {}/{f}", dir.display())))?;
            }
        }
    }
    Ok(())
}

/// Lets the apiserver reach the kubelet API (logs, exec) as local-up-cluster does.
async fn bind_apiserver_to_kubelet_api(client: &Client) -> Result<(), LocalError> {
    let api: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding = ClusterRoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some("unstuck:kube-apiserver-kubelet-admin".into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "system:kubelet-api-admin".into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: "kube-apiserver".into(),
            ..Default::default()
        }]),
    };
    match api.create(&PostParams::default(), &binding).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(source) => Err(LocalError::Api {
            what: "binding kube-apiserver to the kubelet API".into(),
            source,
        }),
    }
}

/// A kube client for a kubeconfig file.
pub async fn client_for(path: &Path) -> Result<Client, LocalError> {
    let err = |message: String| LocalError::Client {
        path: path.to_path_buf(),
        message,
    };
    let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| err(e.to_string()))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| err(e.to_string()))?;
    client_from_config(cfg).map_err(|e| err(e.to_string()))
}

/// A client that does not retry 503s: kube's default policy backs off for
/// many minutes on them, and a dead aggregated API answers 503 forever.
/// To the doctor that answer is data, to be recorded at once.
///
/// It says who it is (`User-Agent: unstuck/<version>`): the API server
/// names a write's field manager after the client's agent, and the
/// doctor's owner verdict counts a write as a controller at work unless
/// its manager is a person's tool. Without it kube's writes show as
/// `unknown`.
pub fn client_from_config(mut cfg: kube::Config) -> Result<Client, kube::Error> {
    cfg.default_retry = false;
    cfg.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(concat!("unstuck/", env!("CARGO_PKG_VERSION"))),
    ));
    Client::try_from(cfg)
}

/// A plain HTTP GET to 127.0.0.1 (etcd's health endpoint speaks HTTP/1).
async fn http_get_local(port: u16, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::net::TcpStream::connect(("127.0.0.1", port)),
    )
    .await??;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut buf)).await??;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn spawn_reaper(program: &Path, dir: &Path) -> Result<(Child, ChildStdin), LocalError> {
    let mut child = std::process::Command::new(program)
        .arg("__reap")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(
            fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("logs/reaper.log"))
                .map_err(io("opening the reaper log"))?,
        )
        .process_group(0)
        .spawn()
        .map_err(io(format!("starting the reaper {}", program.display())))?;
    let stdin = child.stdin.take().expect("piped stdin");
    Ok((child, stdin))
}

/// The reaper's body (`unstuck __reap DIR`): wait until the harness lets go
/// of our stdin — by `down`, by exiting, or by being killed — then tear the
/// cluster down if it is still there.
pub async fn reap(dir: &Path) -> Option<TeardownReport> {
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    if !dir.join("state.json").exists() {
        return None;
    }
    let report = teardown::teardown(dir).await;
    let _ = writeln!(std::io::stderr(), "reaper: harness gone; {report}");
    Some(report)
}

use std::os::unix::process::CommandExt as _;

/// Tears down clusters whose owner died. Returns their names and reports.
pub async fn sweep_stale() -> Result<Vec<(String, TeardownReport)>, LocalError> {
    let root = state::state_root();
    let _lock = state::lock_root(&root)?;
    Ok(sweep_stale_locked(&root).await)
}

async fn sweep_stale_locked(root: &Path) -> Vec<(String, TeardownReport)> {
    let mut swept = Vec::new();
    for (dir, st) in state::list(root) {
        let stale = match st {
            Ok(Some(s)) => s.is_stale(),
            // A directory without a readable record is a crash mid-`up`.
            Ok(None) | Err(_) => true,
        };
        if stale {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let report = teardown::teardown(&dir).await;
            tracing::info!("removed stale cluster '{name}': {report}");
            swept.push((name, report));
        }
    }
    swept
}

/// A cluster as `unstuck cluster list/status` show it.
#[derive(Debug, serde::Serialize)]
pub struct ClusterStatus {
    pub name: String,
    pub dir: PathBuf,
    pub slot: Option<u8>,
    pub k8s_version: Option<String>,
    pub stale: bool,
    pub components: Vec<(String, bool)>,
    pub kubeconfig: PathBuf,
}

pub fn list() -> Vec<ClusterStatus> {
    state::list(&state::state_root())
        .into_iter()
        .map(|(dir, st)| {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let st = st.ok().flatten();
            ClusterStatus {
                kubeconfig: dir.join("admin.kubeconfig"),
                slot: st.as_ref().map(|s| s.layout.slot),
                k8s_version: st.as_ref().map(|s| s.k8s_version.clone()),
                stale: st.as_ref().is_none_or(ClusterState::is_stale),
                components: st
                    .map(|s| {
                        s.components
                            .iter()
                            .map(|c| (c.name.clone(), c.process.is_alive()))
                            .collect()
                    })
                    .unwrap_or_default(),
                name,
                dir,
            }
        })
        .collect()
}

/// Tears down the named cluster (also one made by another process).
pub async fn down(name: &str) -> Result<TeardownReport, LocalError> {
    layout::validate_name(name).map_err(LocalError::Name)?;
    preflight::check_root()?;
    let dir = state::state_root().join(name);
    if !dir.exists() {
        return Err(LocalError::NotFound(name.to_string()));
    }
    Ok(teardown::teardown(&dir).await)
}

//! Bringing a local cluster up: configuration, the components in their
//! order, each waited on until it answers (or its log's tail said why not).

use std::{
    fs,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Stdio},
    time::{Duration, Instant},
};

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use kube::{Api, Client, api::PostParams};

use super::{
    ClusterError, UpTimings,
    config::{self, ComponentCommand},
    io,
    layout::Layout,
    network, pki,
    process::{self, Lifetime},
    state::{ClusterState, ComponentProcess},
};
use crate::{
    cluster::readiness,
    components::Binaries,
    exec::Cmd,
    node::ProcRef,
    wait::{self, Poll},
};

/// What every step of `up` starts from: the components' command lines,
/// how long they live, and when `up` gives up.
struct Phase<'a> {
    commands: &'a [ComponentCommand],
    lifetime: Lifetime,
    deadline: Instant,
}

impl Phase<'_> {
    fn command(&self, name: &str) -> &ComponentCommand {
        self.commands
            .iter()
            .find(|c| c.name == name)
            .expect("known component")
    }

    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// A cluster part-way through `up`: what is started so far.
pub(super) struct Starting {
    pub(super) state: ClusterState,
    pub(super) bins: Binaries,
    pub(super) children: Vec<(String, Child)>,
    pub(super) reaper: Option<(Child, ChildStdin)>,
}

impl Starting {
    pub(super) async fn run(
        &mut self,
        lifetime: Lifetime,
        timeout: Duration,
        started: Instant,
    ) -> Result<(Client, UpTimings), ClusterError> {
        let l = self.state.layout.clone();
        let deadline = started + timeout;
        write_configs(&l)?;
        network::create_host_link(&self.bins.ip, &l).await?;
        make_cgroup_root(&l)?;
        let commands = config::component_commands(&l, &self.bins);
        let phase = Phase {
            commands: &commands,
            lifetime,
            deadline,
        };
        let client = self.start_control_plane(&phase).await?;
        let control_plane_ready = started.elapsed();
        self.start_node(&phase, &client).await?;
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

    /// etcd, kube-apiserver (until `/readyz`), kube-controller-manager and
    /// kube-scheduler; a client of the admin.
    async fn start_control_plane(&mut self, phase: &Phase<'_>) -> Result<Client, ClusterError> {
        let l = self.state.layout.clone();
        self.start(phase.command("etcd"), phase.lifetime)?;
        tracing::debug!(target: crate::STEP_LOG, "etcd starts for cluster '{}'", l.name);
        let etcd_port = l.etcd_client_port();
        self.wait_for(
            "etcd to report healthy",
            phase.remaining(),
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

        self.start(phase.command("kube-apiserver"), phase.lifetime)?;
        let client = crate::cluster::client::client_for(&l.admin_kubeconfig()).await?;
        let c = client.clone();
        self.wait_for(
            "kube-apiserver /readyz",
            phase.remaining(),
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
        tracing::debug!(target: crate::STEP_LOG, "kube-apiserver answers for cluster '{}'", l.name);
        bind_apiserver_to_kubelet_api(&client).await?;
        self.start(phase.command("kube-controller-manager"), phase.lifetime)?;
        self.start(phase.command("kube-scheduler"), phase.lifetime)?;
        Ok(client)
    }

    /// containerd (with the images imported) and the kubelet, until the
    /// node is Ready, pods are admitted and the cluster carries its mark.
    async fn start_node(&mut self, phase: &Phase<'_>, client: &Client) -> Result<(), ClusterError> {
        let l = self.state.layout.clone();
        self.start(phase.command("containerd"), phase.lifetime)?;
        let sock = l.containerd_socket();
        let ctr = self.bins.ctr.clone();
        self.wait_for(
            "containerd to answer on its socket",
            phase.remaining(),
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
        tracing::debug!(target: crate::STEP_LOG, "containerd imports images for cluster '{}'", l.name);
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

        self.start(phase.command("kubelet"), phase.lifetime)?;
        let node_name = l.node_name();
        self.wait_for(
            &format!("node {node_name} to be Ready"),
            phase.remaining(),
            "kubelet",
            || readiness::node_ready(client, &node_name),
        )
        .await?;
        self.wait_for(
            "the default ServiceAccount (pods are refused without it)",
            phase.remaining(),
            "kube-controller-manager",
            || readiness::default_service_account(client),
        )
        .await?;
        // The mark that lets `unstuck run` know this cluster is its own.
        self.wait_for(
            "the marker kube-system/unstuck-cluster",
            phase.remaining(),
            "kube-apiserver",
            || readiness::marked(client),
        )
        .await
    }

    fn start(&mut self, cmd: &ComponentCommand, lifetime: Lifetime) -> Result<(), ClusterError> {
        let l = &self.state.layout;
        let child = process::spawn(cmd, &l.log_file(cmd.name), lifetime)?;
        let pid = child.id() as i32;
        self.children.push((cmd.name.to_string(), child));
        let process = ProcRef::of_pid(pid).ok_or_else(|| self.exited(cmd.name))?;
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
    ) -> Result<(), ClusterError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Poll<()>>,
    {
        // A person at `cluster up` sees what the boot waits for.
        let _shown = crate::waiting::show(what, timeout);
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
            Err(source) => Err(ClusterError::Timeout {
                source,
                logs: self.state.layout.logs_dir(),
            }),
        }
    }

    fn exited(&mut self, component: &str) -> ClusterError {
        let log = self.state.layout.log_file(component);
        let status = self
            .children
            .iter_mut()
            .filter(|(name, _)| name == component)
            .filter_map(|(_, c)| c.try_wait().ok().flatten())
            .map(|s| s.to_string())
            .next()
            .unwrap_or_else(|| "exited".into());
        ClusterError::ComponentExited {
            component: component.to_string(),
            status,
            tail: process::log_tail(&log, 15),
            log,
        }
    }

    /// Kills and reaps what `up` started before it failed; the teardown
    /// that ran first has stopped most of it, and its report says what
    /// remains. A failure here is logged beside the start-up's error.
    pub(super) fn reap_children(&mut self) {
        for (name, c) in &mut self.children {
            if let Err(e) = c.kill().and_then(|()| c.wait().map(drop)) {
                tracing::warn!("reaping {name} (pid {}): {e}", c.id());
            }
        }
        if let Some((mut child, stdin)) = self.reaper.take() {
            drop(stdin);
            if let Err(e) = child.wait() {
                tracing::warn!("reaping the reaper {}: {e}", child.id());
            }
        }
    }
}

fn write_configs(l: &Layout) -> Result<(), ClusterError> {
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
fn make_cgroup_root(l: &Layout) -> Result<(), ClusterError> {
    for h in crate::host::cgroup_v1_hierarchies() {
        let dir = h.join(l.cgroup_root().trim_start_matches('/'));
        fs::create_dir_all(&dir).map_err(io(format!("creating cgroup {}", dir.display())))?;
        // Only the cpuset hierarchy has these files.
        for f in ["cpuset.cpus", "cpuset.mems"].map(|f| (f, h.join(f))) {
            let (f, from) = f;
            if !from.exists() {
                continue;
            }
            let v = fs::read_to_string(&from).map_err(io(format!("reading {}", from.display())))?;
            fs::write(dir.join(f), v.trim())
                .map_err(io(format!("writing {}/{f}", dir.display())))?;
        }
    }
    Ok(())
}

/// Lets the apiserver reach the kubelet API (logs, exec) as local-up-cluster does.
async fn bind_apiserver_to_kubelet_api(client: &Client) -> Result<(), ClusterError> {
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
        Err(source) => Err(ClusterError::Api {
            what: "binding kube-apiserver to the kubelet API".into(),
            source,
        }),
    }
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

pub(super) fn spawn_reaper(
    program: &Path,
    dir: &Path,
) -> Result<(Child, ChildStdin), ClusterError> {
    let mut child = std::process::Command::new(program)
        .args(["__reap", "--provider", "local"])
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

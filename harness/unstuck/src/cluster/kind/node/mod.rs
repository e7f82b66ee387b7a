//! [`Node`] for the `kind` provider: the node is a Docker container, so
//! every read and action is one `docker exec` into it (privileged, as kind
//! runs its own node commands). /proc is read by short bash scripts that
//! print one record per process in a fixed format, parsed here with the
//! same parsers as the local node's; components are systemd services.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

mod procfs;
mod units;

use self::procfs::{
    LINKS_SCRIPT, POD_PROCESSES_SCRIPT, PROCESSES_SCRIPT, parse_links, parse_pod_processes,
    parse_processes,
};
use self::units::KUBELET_HEALTHZ_SCRIPT;
use crate::docker::Docker;
use crate::{
    exec::{Cmd, RunError},
    host,
    node::{
        BoxFuture, CniPlace, ComponentRestart, ComponentStop, Holder, KernelTask, Node, NodeError,
        NodeFuture, ProcRef, await_exec, started_pid,
    },
};

/// Where a kind node keeps what the doctor reads.
const KUBELET_DIR: &str = "/var/lib/kubelet";
const CONTAINERD_SOCKET: &str = "/run/containerd/containerd.sock";
const CNI_CONF_DIR: &str = "/etc/cni/net.d";
/// The CNI configuration the offline node image carries (ci/kind/setup.sh
/// writes it into /etc/cni/net.d under [`CNI_CONFLIST_NAME`] and keeps a
/// copy here, so it can be written back after a fault removed it).
const CNI_CONFLIST_COPY: &str = "/kind/unstuck-cni.conflist";
pub const CNI_CONFLIST_NAME: &str = "10-unstuck.conflist";

/// The node of a kind cluster: a container on this machine's Docker.
#[derive(Clone, Debug)]
pub struct KindNode {
    container: String,
    docker: Docker,
    kubelet_dir: PathBuf,
    cni_own: Option<unstuck_core::doctor::node::CniConfigFile>,
}

impl KindNode {
    /// The node in container `container` (its name is also the API node's
    /// name). Reads the node image's own CNI configuration once, so it
    /// can be restored after a fault removed it.
    pub async fn open(docker: Docker, container: &str) -> Result<Self, NodeError> {
        let mut node = Self {
            container: container.to_string(),
            docker,
            kubelet_dir: PathBuf::from(KUBELET_DIR),
            cni_own: None,
        };
        // An image built before the copy was kept has none: nothing to
        // restore from then, which the CNI fault's revert says.
        let copy = node
            .sh(r#"[ ! -e "$1" ] || cat -- "$1""#, &[CNI_CONFLIST_COPY])
            .await?;
        node.cni_own = (!copy.is_empty()).then(|| unstuck_core::doctor::node::CniConfigFile {
            path: Path::new(CNI_CONF_DIR).join(CNI_CONFLIST_NAME),
            content: copy,
        });
        Ok(node)
    }

    pub fn container(&self) -> &str {
        &self.container
    }

    fn failed(&self, what: impl Into<String>) -> NodeError {
        NodeError::Failed {
            node: self.container.clone(),
            what: what.into(),
        }
    }

    fn run_error(&self) -> impl FnOnce(RunError) -> NodeError {
        let node = self.container.clone();
        move |source| NodeError::Run { node, source }
    }

    /// `sh -c SCRIPT sh ARGS...` in the node.
    async fn sh(&self, script: &str, args: &[&str]) -> Result<String, NodeError> {
        self.shell("sh", script, args, None).await
    }

    async fn shell(
        &self,
        shell: &str,
        script: &str,
        args: &[&str],
        input: Option<&str>,
    ) -> Result<String, NodeError> {
        let mut cmd = Cmd::new(shell)
            .arg("-c")
            .arg(script)
            .arg(shell)
            .args(args.iter().copied())
            .timeout(Duration::from_secs(60));
        if let Some(input) = input {
            cmd = cmd.stdin(input.as_bytes().to_vec());
        }
        self.run(cmd).await.map_err(self.run_error())
    }
}

impl Node for KindNode {
    fn name(&self) -> &str {
        &self.container
    }

    fn container_network(&self) -> NodeFuture<'_, Option<String>> {
        Box::pin(async {
            // The cluster's network: the node's first (a kind node has one).
            let networks = Docker::default()
                .container_networks(&self.container)
                .await
                .map_err(|e| self.failed(e.to_string()))?;
            Ok(networks.into_iter().next())
        })
    }

    fn kubelet_dir(&self) -> &Path {
        &self.kubelet_dir
    }

    /// The kubelet logs to journald (`journalctl -u kubelet`).
    fn kubelet_log_path(&self) -> Option<PathBuf> {
        None
    }

    fn cni_config(&self) -> Option<CniPlace> {
        Some(CniPlace {
            conf_dir: PathBuf::from(CNI_CONF_DIR),
            own: self.cni_own.clone(),
        })
    }

    fn write_file<'a>(&'a self, path: &'a Path, content: &'a str) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            let p = path.display().to_string();
            self.shell("sh", r#"cat > "$1""#, &[&p], Some(content))
                .await
                .map(drop)
        })
    }

    fn remove_file<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            let p = path.display().to_string();
            self.sh(r#"rm -f -- "$1""#, &[&p]).await.map(drop)
        })
    }

    fn rename<'a>(&'a self, from: &'a Path, to: &'a Path) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            let (f, t) = (from.display().to_string(), to.display().to_string());
            self.sh(r#"mv -f -- "$1" "$2""#, &[&f, &t]).await.map(drop)
        })
    }

    fn containerd_address(&self) -> PathBuf {
        PathBuf::from(CONTAINERD_SOCKET)
    }

    /// The node image's containerd config names it
    /// (ci/kind/node-files/etc/containerd/config.toml).
    fn registry_hosts_dir(&self) -> PathBuf {
        PathBuf::from("/etc/containerd/certs.d")
    }

    fn ctr(&self) -> Cmd {
        Cmd::new("ctr")
            .args(["--address", CONTAINERD_SOCKET, "-n", "k8s.io"])
            .timeout(Duration::from_secs(30))
    }

    fn run(&self, cmd: Cmd) -> BoxFuture<'_, Result<String, RunError>> {
        Box::pin(async move { self.docker.exec(&self.container, &cmd).output().await })
    }

    fn read_file<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, String> {
        Box::pin(async move {
            let p = path.display().to_string();
            self.sh(r#"cat -- "$1""#, &[&p]).await
        })
    }

    fn kubelet_log_tail(&self, max_bytes: u64) -> NodeFuture<'_, Option<String>> {
        Box::pin(async move {
            let max = max_bytes.to_string();
            let text = self
                .sh(
                    r#"journalctl -u kubelet --no-pager -o cat 2>/dev/null | tail -c "$1""#,
                    &[&max],
                )
                .await?;
            if text.is_empty() {
                return Ok(None);
            }
            if text.len() as u64 >= max_bytes {
                // Drop the partial first line.
                return Ok(Some(
                    text.split_once('\n')
                        .map(|(_, r)| r.to_owned())
                        .unwrap_or_default(),
                ));
            }
            Ok(Some(text))
        })
    }

    fn list_dir<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, Vec<String>> {
        Box::pin(async move {
            let p = path.display().to_string();
            let out = self
                .sh(r#"[ -d "$1" ] || exit 0; ls -1A -- "$1""#, &[&p])
                .await?;
            let mut names: Vec<String> = out.lines().map(str::to_owned).collect();
            names.sort();
            Ok(names)
        })
    }

    fn mounts(&self) -> NodeFuture<'_, Vec<host::Mount>> {
        Box::pin(async move {
            let text = self.read_file(Path::new("/proc/self/mountinfo")).await?;
            Ok(host::parse_mountinfo(&text))
        })
    }

    fn processes(&self) -> NodeFuture<'_, Vec<host::Process>> {
        Box::pin(async move {
            Ok(parse_processes(
                &self.shell("bash", PROCESSES_SCRIPT, &[], None).await?,
            ))
        })
    }

    fn pod_processes<'a>(&'a self, pod_uid: &'a str) -> NodeFuture<'a, Vec<KernelTask>> {
        Box::pin(async move {
            use unstuck_core::doctor::node::kernel::mount_of;
            if pod_uid.is_empty() {
                return Ok(Vec::new());
            }
            let text = self
                .shell("bash", POD_PROCESSES_SCRIPT, &[pod_uid], None)
                .await?;
            let mut tasks = Vec::new();
            for (mut task, _) in parse_pod_processes(&text) {
                if let Some(path) = task.path.clone() {
                    let pid = task.pid.to_string();
                    // A process that exited since it was listed has no mounts to show.
                    if let Ok(info) = self.sh(r#"cat "/proc/$1/mountinfo""#, &[&pid]).await {
                        task.mount = mount_of(&host::parse_mountinfo(&info), &path).cloned();
                    }
                }
                tasks.push(task);
            }
            Ok(tasks)
        })
    }

    fn holders_of<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, Vec<Holder>> {
        Box::pin(async move {
            let links = self.sh(LINKS_SCRIPT, &[]).await?;
            let uses = parse_links(&links, path);
            if uses.is_empty() {
                return Ok(Vec::new());
            }
            let procs = self.processes().await?;
            let mut holders: Vec<Holder> = Vec::new();
            for (pid, u) in uses {
                let Some(p) = procs.iter().find(|p| p.pid == pid && p.state != 'Z') else {
                    continue;
                };
                match holders.iter_mut().find(|h| h.pid == pid) {
                    Some(h) => h.uses.push(u),
                    None => holders.push(Holder {
                        pid,
                        start_time: p.start_time,
                        state: p.state,
                        command: p.command_line(),
                        uses: vec![u],
                    }),
                }
            }
            Ok(holders)
        })
    }

    fn signal(&self, pid: i32, signal: i32) -> NodeFuture<'_, ()> {
        Box::pin(async move {
            let (sig, pid) = (signal.to_string(), pid.to_string());
            match self
                .shell("bash", r#"kill -"$1" -- "$2""#, &[&sig, &pid], None)
                .await
            {
                Err(NodeError::Run {
                    source: RunError::Failed { output, .. },
                    ..
                }) if output.contains("No such process") => Ok(()),
                other => other.map(drop),
            }
        })
    }

    fn make_dir<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            let p = path.display().to_string();
            self.sh(r#"mkdir -p -- "$1""#, &[&p]).await.map(drop)
        })
    }

    fn remove_dir<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            let p = path.display().to_string();
            self.sh(r#"[ ! -e "$1" ] || rmdir -- "$1""#, &[&p])
                .await
                .map(drop)
        })
    }

    fn mount_tmpfs<'a>(&'a self, target: &'a Path, label: &'a str) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            let t = target.display().to_string();
            self.sh(r#"mount -t tmpfs -- "$1" "$2""#, &[label, &t])
                .await
                .map(drop)
        })
    }

    fn unmount<'a>(&'a self, path: &'a Path, lazy: bool) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            let p = path.display().to_string();
            let script = if lazy {
                r#"umount -l -- "$1""#
            } else {
                r#"umount -- "$1""#
            };
            self.sh(script, &[&p]).await.map(drop)
        })
    }

    /// The process outlives the `docker exec` (it is re-parented to the
    /// node's init), in a session of its own.
    fn start_background<'a>(&'a self, argv: &'a [String]) -> NodeFuture<'a, ProcRef> {
        Box::pin(async move {
            let args: Vec<&str> = argv.iter().map(String::as_str).collect();
            let out = self
                .sh(r#"setsid "$@" </dev/null >/dev/null 2>&1 & echo $!"#, &args)
                .await?;
            let pid = started_pid(&self.container, argv, &out)?;
            await_exec(&self.container, argv, pid, Duration::from_secs(10), || {
                self.process(pid)
            })
            .await
        })
    }

    /// `systemctl restart containerd`, until `ctr version` answers.
    fn restart_runtime(&self) -> NodeFuture<'_, ComponentRestart> {
        Box::pin(async move {
            let probe = self.ctr().arg("version").timeout(Duration::from_secs(5));
            self.restart_unit("containerd", "containerd", probe, Duration::from_secs(60))
                .await
        })
    }

    fn kubelet_running(&self) -> NodeFuture<'_, bool> {
        Box::pin(async move { Ok(self.component("kubelet").await?.is_some()) })
    }

    /// `systemctl stop kubelet`: systemd stops only the kubelet's own
    /// cgroup; the pods' containers belong to containerd's shims and run on.
    fn stop_kubelet(&self) -> NodeFuture<'_, ComponentStop> {
        Box::pin(async move {
            let old = self.component("kubelet").await?;
            if old.is_some() {
                self.systemctl("stop", "kubelet").await?;
            }
            if let Some(p) = &old
                && self
                    .process(p.pid)
                    .await?
                    .is_some_and(|q| q.start_time == p.start_time)
            {
                return Err(self.failed(format!(
                    "kubelet {} survives `systemctl stop kubelet`",
                    p.pid
                )));
            }
            Ok(ComponentStop {
                component: "kubelet".into(),
                stopped: old.as_ref().map(ProcRef::of),
                killed: false,
            })
        })
    }

    /// `systemctl restart kubelet`, until its healthz says `ok`.
    fn restart_kubelet(&self) -> NodeFuture<'_, ComponentRestart> {
        Box::pin(async move {
            // bash's /dev/tcp: the node image has no HTTP client.
            let probe = Cmd::new("bash")
                .arg("-c")
                .arg(KUBELET_HEALTHZ_SCRIPT)
                .timeout(Duration::from_secs(5));
            self.restart_unit("kubelet", "kubelet", probe, Duration::from_secs(90))
                .await
        })
    }
}

//! [`Node`] for the `local` provider: the node is this machine, so files,
//! /proc and mounts are read directly and actions are syscalls.
mod component;

use std::{
    io::{Read, Seek, SeekFrom},
    path::{Path, PathBuf},
    time::Duration,
};

use super::{
    LocalCluster,
    config::{self, ComponentCommand},
    layout::Layout,
    state::{self, ClusterState},
};
use crate::{
    components::{self, Binaries},
    exec::{Cmd, RunError},
    host,
    node::{
        BoxFuture, CniPlace, ComponentRestart, ComponentStop, Holder, HolderUse, HolderUseKind,
        KernelTask, Node, NodeError, NodeFuture, ProcRef, await_exec, started_pid,
    },
};

/// The node of a local cluster.
#[derive(Clone, Debug)]
pub struct LocalNode {
    name: String,
    kubelet_dir: PathBuf,
    layout: Layout,
    bins: Binaries,
}

impl LocalNode {
    /// The node of a cluster this process brought up.
    pub fn of(cluster: &LocalCluster) -> Self {
        Self::new(cluster.layout().clone(), cluster.binaries().clone())
    }

    pub fn new(layout: Layout, bins: Binaries) -> Self {
        Self {
            name: layout.node_name(),
            kubelet_dir: layout.kubelet_dir(),
            layout,
            bins,
        }
    }

    /// The node of the local cluster called `cluster`, also one made by
    /// another process (`unstuck cluster up`), from its state record.
    pub fn open(cluster: &str) -> Result<Self, NodeError> {
        let dir = state::state_root().join(cluster);
        let failed = |what: String| NodeError::Failed {
            node: format!("{cluster}-node"),
            what,
        };
        let st = ClusterState::load(&dir)
            .map_err(|source| NodeError::Provider {
                node: format!("{cluster}-node"),
                what: "reading its cluster's record".into(),
                source: Box::new(source),
            })?
            .ok_or_else(|| {
                failed(format!(
                    "no local cluster named '{cluster}' ({})",
                    dir.display()
                ))
            })?;
        let bins = components::locate(&st.k8s_version).map_err(|source| NodeError::Provider {
            node: format!("{cluster}-node"),
            what: "locating its components".into(),
            source: Box::new(source),
        })?;
        Ok(Self::new(st.layout, bins))
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    fn io(&self, what: impl Into<String>) -> impl FnOnce(std::io::Error) -> NodeError {
        let (node, what) = (self.name.clone(), what.into());
        move |source| NodeError::Io { node, what, source }
    }

    fn failed(&self, what: impl Into<String>) -> NodeError {
        NodeError::Failed {
            node: self.name.clone(),
            what: what.into(),
        }
    }

    fn caused<E: std::error::Error + Send + Sync + 'static>(
        &self,
        what: impl Into<String>,
    ) -> impl FnOnce(E) -> NodeError {
        let (node, what) = (self.name.clone(), what.into());
        move |source| NodeError::Provider {
            node,
            what,
            source: Box::new(source),
        }
    }

    fn state(&self) -> Result<ClusterState, NodeError> {
        let dir = &self.layout.dir;
        ClusterState::load(dir)
            .map_err(self.caused("reading its cluster's record"))?
            .ok_or_else(|| self.failed(format!("no state record in {}", dir.display())))
    }

    /// The command line `up` starts component `name` with.
    fn command(&self, name: &str) -> Result<ComponentCommand, NodeError> {
        config::component_commands(&self.layout, &self.bins)
            .into_iter()
            .find(|c| c.name == name)
            .ok_or_else(|| self.failed(format!("no {name} command line")))
    }
}

/// Paths under `/proc/PID/{cwd,root,fd/*}` that lie at or below `dir`.
fn uses_under(pid: i32, dir: &Path) -> Vec<HolderUse> {
    let link = |p: PathBuf| -> Option<PathBuf> {
        let target = std::fs::read_link(p).ok()?;
        let text = target.to_string_lossy();
        // An unlinked file or directory reads as "<path> (deleted)".
        let clean = text.strip_suffix(" (deleted)").unwrap_or(&text);
        Some(PathBuf::from(clean))
    };
    let base = PathBuf::from(format!("/proc/{pid}"));
    let mut uses = Vec::new();
    for (kind, name) in [(HolderUseKind::Cwd, "cwd"), (HolderUseKind::Root, "root")] {
        if let Some(p) = link(base.join(name))
            && p.starts_with(dir)
        {
            uses.push(HolderUse { kind, path: p });
        }
    }
    if let Ok(fds) = std::fs::read_dir(base.join("fd")) {
        let mut fds: Vec<(u32, PathBuf)> = fds
            .flatten()
            .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
            .collect();
        fds.sort();
        for (n, p) in fds {
            if let Some(target) = link(p)
                && target.starts_with(dir)
            {
                uses.push(HolderUse {
                    kind: HolderUseKind::Fd(n),
                    path: target,
                });
            }
        }
    }
    uses
}

impl Node for LocalNode {
    fn name(&self) -> &str {
        &self.name
    }

    fn kubelet_dir(&self) -> &Path {
        &self.kubelet_dir
    }

    fn controller_manager_metrics(
        &self,
    ) -> NodeFuture<'_, Option<unstuck_core::doctor::namespace_stall::ControllerManagerMetrics>>
    {
        // On loopback: the control plane runs as processes of this machine.
        Box::pin(async { Ok(Some(super::kcm_metrics::read(&self.layout.name).await)) })
    }

    fn cni_config(&self) -> Option<CniPlace> {
        let conf_dir = self.layout.cni_conf_dir();
        Some(CniPlace {
            own: Some(unstuck_core::doctor::node::CniConfigFile {
                path: conf_dir.join(config::CNI_CONFLIST_NAME),
                content: config::cni_conflist(&self.layout),
            }),
            conf_dir,
        })
    }

    fn write_file<'a>(&'a self, path: &'a Path, content: &'a str) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            std::fs::write(path, content).map_err(self.io(format!("writing {}", path.display())))
        })
    }

    fn remove_file<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(self.io(format!("removing {}", path.display()))(e))
                }
                _ => Ok(()),
            }
        })
    }

    fn rename<'a>(&'a self, from: &'a Path, to: &'a Path) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            std::fs::rename(from, to).map_err(self.io(format!(
                "renaming {} to {}",
                from.display(),
                to.display()
            )))
        })
    }

    fn kubelet_log_path(&self) -> Option<PathBuf> {
        Some(self.layout.log_file("kubelet"))
    }

    fn containerd_address(&self) -> PathBuf {
        self.layout.containerd_socket()
    }

    fn registry_hosts_dir(&self) -> PathBuf {
        self.layout.registry_hosts_dir()
    }

    fn ctr(&self) -> Cmd {
        Cmd::new(&self.bins.ctr)
            .arg("--address")
            .arg(self.layout.containerd_socket())
            .args(["-n", "k8s.io"])
            .timeout(Duration::from_secs(30))
    }

    fn run(&self, cmd: Cmd) -> BoxFuture<'_, Result<String, RunError>> {
        Box::pin(async move { cmd.output().await })
    }

    fn read_file<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, String> {
        Box::pin(async move {
            tokio::fs::read_to_string(path)
                .await
                .map_err(self.io(format!("reading {}", path.display())))
        })
    }

    fn kubelet_log_tail(&self, max_bytes: u64) -> NodeFuture<'_, Option<String>> {
        Box::pin(async move {
            let Some(path) = self.kubelet_log_path() else {
                return Ok(None);
            };
            let what = format!("reading the tail of {}", path.display());
            let mut file = match std::fs::File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(self.io(what)(e)),
            };
            let len = file.metadata().map_err(self.io(what.clone()))?.len();
            let start = len.saturating_sub(max_bytes);
            file.seek(SeekFrom::Start(start))
                .map_err(self.io(what.clone()))?;
            let mut buf = Vec::new();
            file.read_to_end(&mut buf).map_err(self.io(what))?;
            let mut text = String::from_utf8_lossy(&buf).into_owned();
            if start > 0 {
                // Drop the partial first line.
                text = text
                    .split_once('\n')
                    .map(|(_, r)| r.to_owned())
                    .unwrap_or_default();
            }
            Ok(Some(text))
        })
    }

    fn list_dir<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, Vec<String>> {
        Box::pin(async move {
            let entries = match std::fs::read_dir(path) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(self.io(format!("listing {}", path.display()))(e)),
            };
            let mut names: Vec<String> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            Ok(names)
        })
    }

    fn mounts(&self) -> NodeFuture<'_, Vec<host::Mount>> {
        Box::pin(async move {
            let text = std::fs::read_to_string("/proc/self/mountinfo")
                .map_err(self.io("reading /proc/self/mountinfo"))?;
            Ok(host::parse_mountinfo(&text))
        })
    }

    fn processes(&self) -> NodeFuture<'_, Vec<host::Process>> {
        Box::pin(async move { Ok(host::processes()) })
    }

    fn pod_processes<'a>(&'a self, pod_uid: &'a str) -> NodeFuture<'a, Vec<KernelTask>> {
        Box::pin(async move {
            Ok(host::processes()
                .iter()
                .filter(|p| p.state != 'Z' && host::in_pod_cgroup(p.pid, pod_uid))
                .map(host::kernel_task)
                .collect())
        })
    }

    /// Never lists the calling process itself: a remedy must not stop the doctor.
    fn holders_of<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, Vec<Holder>> {
        Box::pin(async move {
            let me = std::process::id() as i32;
            Ok(host::processes()
                .into_iter()
                .filter(|p| p.pid != me && p.state != 'Z')
                .filter_map(|p| {
                    let uses = uses_under(p.pid, path);
                    (!uses.is_empty()).then(|| Holder {
                        pid: p.pid,
                        start_time: p.start_time,
                        state: p.state,
                        command: p.command_line(),
                        uses,
                    })
                })
                .collect())
        })
    }

    fn signal(&self, pid: i32, signal: i32) -> NodeFuture<'_, ()> {
        Box::pin(async move {
            host::signal(pid, signal).map_err(self.io(format!("sending signal {signal} to {pid}")))
        })
    }

    fn make_dir<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            std::fs::create_dir_all(path).map_err(self.io(format!("creating {}", path.display())))
        })
    }

    fn remove_dir<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            match std::fs::remove_dir(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(self.io(format!("removing {}", path.display()))(e))
                }
                _ => Ok(()),
            }
        })
    }

    fn mount_tmpfs<'a>(&'a self, target: &'a Path, label: &'a str) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            host::mount_tmpfs(target, label)
                .map_err(self.io(format!("mounting a tmpfs on {}", target.display())))
        })
    }

    fn unmount<'a>(&'a self, path: &'a Path, lazy: bool) -> NodeFuture<'a, ()> {
        Box::pin(async move {
            host::unmount(path, lazy).map_err(self.io(format!(
                "{}unmounting {}",
                if lazy { "lazily " } else { "" },
                path.display()
            )))
        })
    }

    fn start_background<'a>(&'a self, argv: &'a [String]) -> NodeFuture<'a, ProcRef> {
        Box::pin(async move {
            // `setsid` in a background job of a non-interactive sh is not a
            // group leader, so it execs in place: `$!` is the program's pid.
            let out = Cmd::new("sh")
                .args([
                    "-c",
                    r#"setsid "$@" </dev/null >/dev/null 2>&1 & echo $!"#,
                    "sh",
                ])
                .args(argv.iter().cloned())
                .timeout(Duration::from_secs(10))
                .output()
                .await
                .map_err(|source| NodeError::Run {
                    node: self.name.clone(),
                    source,
                })?;
            let pid = started_pid(&self.name, argv, &out)?;
            await_exec(
                &self.name,
                argv,
                pid,
                Duration::from_secs(5),
                || async move { Ok(host::process(pid)) },
            )
            .await
        })
    }

    /// Restarts containerd (see `LocalNode::restart_component`) and
    /// waits until `ctr version` answers.
    fn restart_runtime(&self) -> NodeFuture<'_, ComponentRestart> {
        Box::pin(async move {
            let version = self.ctr().arg("version").timeout(Duration::from_secs(5));
            self.restart_component("containerd", Duration::from_secs(30), || {
                let version = version.clone();
                async move { version.output().await.map(drop) }
            })
            .await
        })
    }

    fn kubelet_running(&self) -> NodeFuture<'_, bool> {
        Box::pin(async move { Ok(self.find_component(&self.state()?, "kubelet").is_some()) })
    }

    fn stop_kubelet(&self) -> NodeFuture<'_, ComponentStop> {
        Box::pin(async move { self.stop_component("kubelet").await })
    }

    /// Restarts the kubelet (see `LocalNode::restart_component`) and
    /// waits until its healthz says `ok`.
    fn restart_kubelet(&self) -> NodeFuture<'_, ComponentRestart> {
        Box::pin(async move {
            let port = self.layout.kubelet_healthz_port();
            self.restart_component("kubelet", Duration::from_secs(60), || {
                component::kubelet_healthz(port)
            })
            .await
        })
    }
}

#[cfg(test)]
mod tests;

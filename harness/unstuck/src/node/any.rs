//! [`AnyNode`]: the node of whichever provider made the cluster. [`Node`]'s
//! methods return `impl Future`, so the trait is not object safe; an enum
//! that forwards each call keeps the injectors and the doctor generic
//! while a run holds one concrete type.

use std::path::{Path, PathBuf};

use super::{
    CniPlace, ComponentRestart, ComponentStop, Holder, KernelTask, KindNode, LocalNode, Node,
    NodeError, ProcRef,
};
use crate::{
    exec::{Cmd, RunError},
    host,
};

#[derive(Clone, Debug)]
pub enum AnyNode {
    Local(LocalNode),
    Kind(KindNode),
}

impl From<LocalNode> for AnyNode {
    fn from(n: LocalNode) -> Self {
        Self::Local(n)
    }
}

impl From<KindNode> for AnyNode {
    fn from(n: KindNode) -> Self {
        Self::Kind(n)
    }
}

/// Forwards one call to the node inside.
macro_rules! forward {
    ($self:ident, $n:ident => $call:expr) => {
        match $self {
            AnyNode::Local($n) => $call,
            AnyNode::Kind($n) => $call,
        }
    };
}

impl Node for AnyNode {
    fn name(&self) -> &str {
        forward!(self, n => n.name())
    }
    fn kubelet_dir(&self) -> &Path {
        forward!(self, n => n.kubelet_dir())
    }
    fn kubelet_log_path(&self) -> Option<PathBuf> {
        forward!(self, n => n.kubelet_log_path())
    }
    fn cni_config(&self) -> Option<CniPlace> {
        forward!(self, n => n.cni_config())
    }
    async fn write_file(&self, path: &Path, content: &str) -> Result<(), NodeError> {
        forward!(self, n => n.write_file(path, content).await)
    }
    async fn remove_file(&self, path: &Path) -> Result<(), NodeError> {
        forward!(self, n => n.remove_file(path).await)
    }
    async fn rename(&self, from: &Path, to: &Path) -> Result<(), NodeError> {
        forward!(self, n => n.rename(from, to).await)
    }
    fn containerd_address(&self) -> PathBuf {
        forward!(self, n => n.containerd_address())
    }
    fn ctr(&self) -> Cmd {
        forward!(self, n => n.ctr())
    }
    async fn run(&self, cmd: Cmd) -> Result<String, RunError> {
        forward!(self, n => n.run(cmd).await)
    }
    async fn read_file(&self, path: &Path) -> Result<String, NodeError> {
        forward!(self, n => n.read_file(path).await)
    }
    async fn kubelet_log_tail(&self, max_bytes: u64) -> Result<Option<String>, NodeError> {
        forward!(self, n => n.kubelet_log_tail(max_bytes).await)
    }
    async fn list_dir(&self, path: &Path) -> Result<Vec<String>, NodeError> {
        forward!(self, n => n.list_dir(path).await)
    }
    async fn mounts(&self) -> Result<Vec<host::Mount>, NodeError> {
        forward!(self, n => n.mounts().await)
    }
    async fn processes(&self) -> Result<Vec<host::Process>, NodeError> {
        forward!(self, n => n.processes().await)
    }
    async fn pod_processes(&self, pod_uid: &str) -> Result<Vec<KernelTask>, NodeError> {
        forward!(self, n => n.pod_processes(pod_uid).await)
    }
    async fn holders_of(&self, path: &Path) -> Result<Vec<Holder>, NodeError> {
        forward!(self, n => n.holders_of(path).await)
    }
    async fn signal(&self, pid: i32, signal: i32) -> Result<(), NodeError> {
        forward!(self, n => n.signal(pid, signal).await)
    }
    async fn make_dir(&self, path: &Path) -> Result<(), NodeError> {
        forward!(self, n => n.make_dir(path).await)
    }
    async fn remove_dir(&self, path: &Path) -> Result<(), NodeError> {
        forward!(self, n => n.remove_dir(path).await)
    }
    async fn mount_tmpfs(&self, target: &Path, label: &str) -> Result<(), NodeError> {
        forward!(self, n => n.mount_tmpfs(target, label).await)
    }
    async fn unmount(&self, path: &Path, lazy: bool) -> Result<(), NodeError> {
        forward!(self, n => n.unmount(path, lazy).await)
    }
    async fn start_background(&self, argv: &[String]) -> Result<ProcRef, NodeError> {
        forward!(self, n => n.start_background(argv).await)
    }
    async fn restart_runtime(&self) -> Result<ComponentRestart, NodeError> {
        forward!(self, n => n.restart_runtime().await)
    }
    async fn kubelet_running(&self) -> Result<bool, NodeError> {
        forward!(self, n => n.kubelet_running().await)
    }
    async fn stop_kubelet(&self) -> Result<ComponentStop, NodeError> {
        forward!(self, n => n.stop_kubelet().await)
    }
    async fn restart_kubelet(&self) -> Result<ComponentRestart, NodeError> {
        forward!(self, n => n.restart_kubelet().await)
    }
}

//! Access to a Kubernetes node's host: its files, mounts, processes and
//! container runtime, and the few actions the node-level fault injectors
//! and the node doctor take there.
//!
//! [`Node`] is the one interface both use. Each provider implements it
//! beside its cluster (`cluster::local::LocalNode`: this machine;
//! `cluster::kind::KindNode`: `docker exec` into the node container), so
//! this module depends on no provider and the providers depend on it. The
//! methods are primitives that each map to one command on a remote node,
//! so a privileged pod with `hostPID` could implement them too.
//!
//! `Node` is object safe (its futures are boxed): a run holds an
//! `Arc<dyn Node>` ([`AnyNode`]) whichever provider made the cluster, and
//! a new provider's node is one `impl Node` with nothing to forward. A
//! boxed future per node call costs nothing next to the `docker exec` or
//! /proc read it waits on.

pub mod cgroup;
mod runtime;

use std::path::{Path, PathBuf};
use unstuck_core::doctor::namespace_stall::ControllerManagerMetrics;

pub use futures::future::BoxFuture;

pub use self::runtime::runtime_facts;
use crate::{
    exec::{Cmd, RunError},
    host,
    text::{quoted, quoted_list},
};
pub use unstuck_core::doctor::node::{
    Holder, HolderUse, HolderUseKind, KernelTask, RuntimeFacts, ShimFact,
};

/// A failed node operation, with what was being done and where.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("on node {node}: {what} failed: {source}")]
    Io {
        node: String,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("on node {node}: {source}")]
    Run {
        node: String,
        #[source]
        source: RunError,
    },
    #[error("on node {node}: {what}")]
    Failed { node: String, what: String },
    /// A failure of the provider's own machinery (its state record, its
    /// process control, a wait), kept whole as the source.
    #[error("on node {node}: {what}: {source}")]
    Provider {
        node: String,
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A process, named by pid and start time so that a recycled pid is
/// never mistaken for it: the one process identity of the harness (a
/// node's component, a fault's process, a cluster's owner and its
/// control-plane components in their state records).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcRef {
    pub pid: i32,
    pub start_time: u64,
    /// Its command line when it was named; empty in records written
    /// before it was kept.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
}

impl ProcRef {
    pub fn of(p: &host::Process) -> Self {
        Self {
            pid: p.pid,
            start_time: p.start_time,
            command: p.command_line(),
        }
    }

    /// Process `pid` of this machine, if it runs.
    pub fn of_pid(pid: i32) -> Option<Self> {
        host::process(pid).map(|p| Self::of(&p))
    }

    /// Whether it still runs on this machine (a zombie counts as gone).
    pub fn is_alive(&self) -> bool {
        host::is_alive(self.pid, self.start_time)
    }

    /// This process in `procs`, if it still runs (zombies count as gone).
    pub fn find<'a>(&self, procs: &'a [host::Process]) -> Option<&'a host::Process> {
        procs
            .iter()
            .find(|p| p.pid == self.pid && p.start_time == self.start_time && p.state != 'Z')
    }
}

/// What a restart of a node component (containerd, the kubelet) did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ComponentRestart {
    /// `containerd`, `kubelet`.
    pub component: String,
    /// The process that was stopped first; `None` when none ran.
    pub old_pid: Option<i32>,
    pub new_pid: i32,
    /// Whether the old process ignored SIGTERM and had to be killed.
    pub killed: bool,
    /// Until the new process answered (containerd its API, the kubelet
    /// its healthz).
    pub took_ms: u128,
}

impl std::fmt::Display for ComponentRestart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.old_pid {
            Some(old) => write!(
                f,
                "restarted {}: pid {old} -> {}",
                self.component, self.new_pid
            )?,
            None => write!(
                f,
                "started {} (none was running): pid {}",
                self.component, self.new_pid
            )?,
        }
        write!(f, ", answering after {} ms", self.took_ms)?;
        if self.killed {
            write!(f, " (the old one ignored SIGTERM and had to be killed)")?;
        }
        Ok(())
    }
}

/// What stopping a node component did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ComponentStop {
    pub component: String,
    /// The process that was stopped; `None` when none ran.
    pub stopped: Option<ProcRef>,
    /// Whether it ignored SIGTERM and had to be killed.
    pub killed: bool,
}

/// Where a node keeps its CNI configuration.
#[derive(Clone, Debug)]
pub struct CniPlace {
    pub conf_dir: PathBuf,
    /// The configuration the cluster's maker wrote, when known.
    pub own: Option<unstuck_core::doctor::node::CniConfigFile>,
}

/// The node of whichever provider made the cluster, as a run holds it
/// (`Arc<AnyNode>`, `&AnyNode`).
pub type AnyNode = dyn Node;

/// A node in a `Debug` of what holds one (the doctor's options): its name.
impl std::fmt::Debug for dyn Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("name", &self.name()).finish()
    }
}

/// What a node call returns.
pub type NodeFuture<'a, T> = BoxFuture<'a, Result<T, NodeError>>;

/// A Kubernetes node's host, as the fault injectors and the node doctor
/// need it. Every method may run remotely, so all are async and fallible.
///
/// Paths are the node's paths. Signals are plain numbers (`libc::SIGSTOP`
/// etc.) and a negative pid names a process group, as with kill(2).
pub trait Node: Send + Sync {
    /// The node's name in the API (`spec.nodeName` of its pods).
    fn name(&self) -> &str;

    /// The kubelet's root directory (`--root-dir`), where pods live under `pods/<uid>`.
    fn kubelet_dir(&self) -> &Path;

    /// The kubelet's log file, when it logs to a file (`None` for a
    /// journald-only node: then [`Node::kubelet_log_tail`] must use another way).
    fn kubelet_log_path(&self) -> Option<PathBuf>;

    /// Where the node's runtime reads its CNI configuration, and the
    /// configuration the cluster's maker wrote when it is known; `None`
    /// when the node cannot say.
    fn cni_config(&self) -> Option<CniPlace>;

    /// The Docker network a container beside this node's cluster (a
    /// webhook's backend, a registry) must join to reach the node and be
    /// reached from it; `None`: any network of the container's own does
    /// (the node is this machine).
    fn container_network(&self) -> NodeFuture<'_, Option<String>> {
        Box::pin(async { Ok(None) })
    }

    /// kube-controller-manager's view of its namespace workqueue, where
    /// this node's cluster lets the doctor read it; `None` where it does
    /// not (then a namespace's stall is judged from the API alone).
    fn controller_manager_metrics(&self) -> NodeFuture<'_, Option<ControllerManagerMetrics>> {
        Box::pin(async { Ok(None) })
    }

    /// Writes `content` to `path` (created or replaced).
    fn write_file<'a>(&'a self, path: &'a Path, content: &'a str) -> NodeFuture<'a, ()>;

    /// Removes a file; one already gone is not an error.
    fn remove_file<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, ()>;

    /// Renames `from` to `to` on the node (same filesystem).
    fn rename<'a>(&'a self, from: &'a Path, to: &'a Path) -> NodeFuture<'a, ()>;

    /// The containerd socket the kubelet talks to; shims name it in `-address`.
    fn containerd_address(&self) -> PathBuf;

    /// The directory the node's containerd reads registry hosts from
    /// (`config_path`: `<dir>/<host>/hosts.toml`, read at each pull).
    fn registry_hosts_dir(&self) -> PathBuf;

    /// A `ctr` command already pointed at the node's containerd and the
    /// CRI namespace (`k8s.io`); add a subcommand and pass it to [`Node::run`].
    fn ctr(&self) -> Cmd;

    /// Runs a command on the node; stdout on success.
    fn run(&self, cmd: Cmd) -> BoxFuture<'_, Result<String, RunError>>;

    /// Reads a whole text file.
    fn read_file<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, String>;

    /// The last `max_bytes` of the kubelet's log (whole lines only), or
    /// `None` when the node has no readable kubelet log.
    fn kubelet_log_tail(&self, max_bytes: u64) -> NodeFuture<'_, Option<String>>;

    /// Names in a directory (sorted; empty when it does not exist).
    fn list_dir<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, Vec<String>>;

    /// The node's mount table (the host mount namespace).
    fn mounts(&self) -> NodeFuture<'_, Vec<host::Mount>>;

    /// Every process on the node.
    fn processes(&self) -> NodeFuture<'_, Vec<host::Process>>;

    /// The processes of the pod with UID `pod_uid` (by their cgroup), as
    /// the kernel shows them: state, wait channel, blocked call and file.
    fn pod_processes<'a>(&'a self, pod_uid: &'a str) -> NodeFuture<'a, Vec<KernelTask>>;

    /// Processes whose cwd, root or open file descriptors lie at or under
    /// `path`: what `fuser -m`/`lsof +D` would name.
    fn holders_of<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, Vec<Holder>>;

    /// Sends a signal; a process that is already gone is not an error.
    fn signal(&self, pid: i32, signal: i32) -> NodeFuture<'_, ()>;

    /// Creates a directory (and its parents); existing is fine.
    fn make_dir<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, ()>;

    /// Removes an empty directory; a missing one is fine.
    fn remove_dir<'a>(&'a self, path: &'a Path) -> NodeFuture<'a, ()>;

    /// Mounts a fresh tmpfs (source name `label`, so it is recognisable in
    /// the mount table) on an existing directory.
    fn mount_tmpfs<'a>(&'a self, target: &'a Path, label: &'a str) -> NodeFuture<'a, ()>;

    /// Unmounts `path`; `lazy` detaches it even while busy (`umount -l`).
    fn unmount<'a>(&'a self, path: &'a Path, lazy: bool) -> NodeFuture<'a, ()>;

    /// Starts `argv` in the background in a new session, not as a child
    /// of the caller (so it outlives the call and no zombie is left to
    /// reap), and returns it. Its process group id is its pid.
    fn start_background<'a>(&'a self, argv: &'a [String]) -> NodeFuture<'a, ProcRef>;

    /// Restarts the container runtime daemon (containerd) with its own
    /// command line, and waits until it answers again.
    fn restart_runtime(&self) -> NodeFuture<'_, ComponentRestart>;

    /// Whether the node's kubelet process runs (a stopped-by-signal one
    /// counts as running: it exists, it just does not work).
    fn kubelet_running(&self) -> NodeFuture<'_, bool>;

    /// Stops the node's kubelet (SIGTERM, SIGKILL after a grace period),
    /// leaving the runtime and the pods' containers running: the node is
    /// lost to the control plane until the kubelet is started again.
    fn stop_kubelet(&self) -> NodeFuture<'_, ComponentStop>;

    /// (Re)starts the node's kubelet with its own command line, as its
    /// service manager would (stopping a running one first), and waits
    /// until it answers its health check.
    fn restart_kubelet(&self) -> NodeFuture<'_, ComponentRestart>;
}

/// The pid a background start printed (`... & echo $!`), or why there is
/// none: the one parse both providers' `start_background` make.
pub fn started_pid(node: &str, argv: &[String], out: &str) -> Result<i32, NodeError> {
    out.trim().parse().map_err(|_| NodeError::Failed {
        node: node.to_owned(),
        what: format!(
            "starting {argv}: no pid in {out}",
            argv = quoted_list(argv),
            out = quoted(out)
        ),
    })
}

/// Waits until process `pid`, started in the background for `argv` on
/// `node`, runs `argv[0]`: until its exec it still shows the starting
/// shell's command line. `look` reads the process (`None` when it is gone).
pub async fn await_exec<F, Fut>(
    node: &str,
    argv: &[String],
    pid: i32,
    within: std::time::Duration,
    mut look: F,
) -> Result<ProcRef, NodeError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<host::Process>, NodeError>>,
{
    let want = argv.first().cloned().unwrap_or_default();
    let deadline = std::time::Instant::now() + within;
    loop {
        match look().await? {
            Some(p) if p.cmdline.first() == Some(&want) => return Ok(ProcRef::of(&p)),
            Some(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            other => {
                return Err(NodeError::Failed {
                    node: node.to_owned(),
                    what: format!(
                        "starting {argv}: process {pid} is {}",
                        other.map_or("gone".to_owned(), |p| format!(
                            "running {}",
                            p.command_line()
                        )),
                        argv = quoted_list(argv)
                    ),
                });
            }
        }
    }
}

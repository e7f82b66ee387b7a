//! Access to a Kubernetes node's host: its files, mounts, processes and
//! container runtime, and the few actions the node-level fault injectors
//! and the node doctor take there.
//!
//! [`Node`] is the one interface both use. [`LocalNode`] implements it for
//! the `local` provider, whose node is this machine; [`KindNode`] for the
//! `kind` provider, through `docker exec` into the node container. The
//! methods are primitives that each map to one command on a remote node,
//! so a privileged pod with `hostPID` could implement them too.
//! [`AnyNode`] is the one a run holds, whichever provider made it.

mod any;
pub mod cgroup;
pub mod kind;
pub mod local;

use std::{
    future::Future,
    path::{Path, PathBuf},
};

pub use self::{any::AnyNode, kind::KindNode, local::LocalNode};
use crate::{
    exec::{Cmd, RunError},
    host,
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
}

/// A process on a node, named by pid and start time so that a recycled pid
/// is never mistaken for it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcRef {
    pub pid: i32,
    pub start_time: u64,
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

/// A Kubernetes node's host, as the fault injectors and the node doctor
/// need it. Every method may run remotely, so all are async and fallible.
///
/// Paths are the node's paths. Signals are plain numbers (`libc::SIGSTOP`
/// etc.) and a negative pid names a process group, as with kill(2).
/// Where a node keeps its CNI configuration.
#[derive(Clone, Debug)]
pub struct CniPlace {
    pub conf_dir: PathBuf,
    /// The configuration the cluster's maker wrote, when known.
    pub own: Option<unstuck_core::doctor::node::CniConfigFile>,
}

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

    /// Writes `content` to `path` (created or replaced).
    fn write_file(
        &self,
        path: &Path,
        content: &str,
    ) -> impl Future<Output = Result<(), NodeError>> + Send;

    /// Removes a file; one already gone is not an error.
    fn remove_file(&self, path: &Path) -> impl Future<Output = Result<(), NodeError>> + Send;

    /// Renames `from` to `to` on the node (same filesystem).
    fn rename(&self, from: &Path, to: &Path) -> impl Future<Output = Result<(), NodeError>> + Send;

    /// The containerd socket the kubelet talks to; shims name it in `-address`.
    fn containerd_address(&self) -> PathBuf;

    /// A `ctr` command already pointed at the node's containerd and the
    /// CRI namespace (`k8s.io`); add a subcommand and pass it to [`Node::run`].
    fn ctr(&self) -> Cmd;

    /// Runs a command on the node; stdout on success.
    fn run(&self, cmd: Cmd) -> impl Future<Output = Result<String, RunError>> + Send;

    /// Reads a whole text file.
    fn read_file(&self, path: &Path) -> impl Future<Output = Result<String, NodeError>> + Send;

    /// The last `max_bytes` of the kubelet's log (whole lines only), or
    /// `None` when the node has no readable kubelet log.
    fn kubelet_log_tail(
        &self,
        max_bytes: u64,
    ) -> impl Future<Output = Result<Option<String>, NodeError>> + Send;

    /// Names in a directory (sorted; empty when it does not exist).
    fn list_dir(&self, path: &Path) -> impl Future<Output = Result<Vec<String>, NodeError>> + Send;

    /// The node's mount table (the host mount namespace).
    fn mounts(&self) -> impl Future<Output = Result<Vec<host::Mount>, NodeError>> + Send;

    /// Every process on the node.
    fn processes(&self) -> impl Future<Output = Result<Vec<host::Process>, NodeError>> + Send;

    /// The processes of the pod with UID `pod_uid` (by their cgroup), as
    /// the kernel shows them: state, wait channel, blocked call and file.
    fn pod_processes(
        &self,
        pod_uid: &str,
    ) -> impl Future<Output = Result<Vec<KernelTask>, NodeError>> + Send;

    /// Processes whose cwd, root or open file descriptors lie at or under
    /// `path`: what `fuser -m`/`lsof +D` would name.
    fn holders_of(
        &self,
        path: &Path,
    ) -> impl Future<Output = Result<Vec<Holder>, NodeError>> + Send;

    /// Sends a signal; a process that is already gone is not an error.
    fn signal(&self, pid: i32, signal: i32) -> impl Future<Output = Result<(), NodeError>> + Send;

    /// Creates a directory (and its parents); existing is fine.
    fn make_dir(&self, path: &Path) -> impl Future<Output = Result<(), NodeError>> + Send;

    /// Removes an empty directory; a missing one is fine.
    fn remove_dir(&self, path: &Path) -> impl Future<Output = Result<(), NodeError>> + Send;

    /// Mounts a fresh tmpfs (source name `label`, so it is recognisable in
    /// the mount table) on an existing directory.
    fn mount_tmpfs(
        &self,
        target: &Path,
        label: &str,
    ) -> impl Future<Output = Result<(), NodeError>> + Send;

    /// Unmounts `path`; `lazy` detaches it even while busy (`umount -l`).
    fn unmount(
        &self,
        path: &Path,
        lazy: bool,
    ) -> impl Future<Output = Result<(), NodeError>> + Send;

    /// Starts `argv` in the background in a new session, not as a child
    /// of the caller (so it outlives the call and no zombie is left to
    /// reap), and returns it. Its process group id is its pid.
    fn start_background(
        &self,
        argv: &[String],
    ) -> impl Future<Output = Result<ProcRef, NodeError>> + Send;

    /// Restarts the container runtime daemon (containerd) with its own
    /// command line, and waits until it answers again.
    fn restart_runtime(&self) -> impl Future<Output = Result<ComponentRestart, NodeError>> + Send;

    /// Whether the node's kubelet process runs (a stopped-by-signal one
    /// counts as running: it exists, it just does not work).
    fn kubelet_running(&self) -> impl Future<Output = Result<bool, NodeError>> + Send;

    /// Stops the node's kubelet (SIGTERM, SIGKILL after a grace period),
    /// leaving the runtime and the pods' containers running: the node is
    /// lost to the control plane until the kubelet is started again.
    fn stop_kubelet(&self) -> impl Future<Output = Result<ComponentStop, NodeError>> + Send;

    /// (Re)starts the node's kubelet with its own command line, as its
    /// service manager would (stopping a running one first), and waits
    /// until it answers its health check.
    fn restart_kubelet(&self) -> impl Future<Output = Result<ComponentRestart, NodeError>> + Send;
}

/// Waits until process `pid`, started in the background for `argv`, runs
/// `argv[0]`: until its exec it still shows the starting shell's command
/// line. `look` reads the process (`None` when it is gone).
pub(crate) async fn await_exec<F, Fut>(
    argv: &[String],
    pid: i32,
    within: std::time::Duration,
    mut look: F,
) -> Result<ProcRef, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<host::Process>, NodeError>>,
{
    let want = argv.first().cloned().unwrap_or_default();
    let deadline = std::time::Instant::now() + within;
    loop {
        match look().await.map_err(|e| e.to_string())? {
            Some(p) if p.cmdline.first() == Some(&want) => return Ok(ProcRef::of(&p)),
            Some(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            other => {
                return Err(format!(
                    "starting {argv:?}: process {pid} is {}",
                    other.map_or("gone".to_owned(), |p| format!(
                        "running {}",
                        p.command_line()
                    ))
                ));
            }
        }
    }
}

/// The runtime's view of the pod with UID `pod_uid`: its containerd
/// containers (by the CRI's `io.kubernetes.pod.uid` label), their tasks,
/// and the shim processes serving them (matched by `-id` and this node's
/// `-address`). `extra_ids` adds container IDs known from elsewhere (the
/// pod's status), for when containerd no longer lists them. Never fails:
/// a query that fails is recorded in [`RuntimeFacts::errors`], because a
/// runtime that does not answer is itself evidence.
pub async fn runtime_facts(node: &impl Node, pod_uid: &str, extra_ids: &[String]) -> RuntimeFacts {
    use unstuck_core::doctor::node::{
        parse_ctr_container_info, parse_ctr_tasks, parse_shim_cmdline,
    };
    let mut facts = RuntimeFacts::default();
    let filter = format!("labels.\"io.kubernetes.pod.uid\"=={pod_uid}");
    let ids: Vec<String> = match node
        .run(node.ctr().args(["containers", "ls", "-q"]).arg(&filter))
        .await
    {
        Ok(out) => out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
        Err(e) => {
            facts.errors.push(e.to_string());
            Vec::new()
        }
    };
    for id in &ids {
        match node
            .run(node.ctr().args(["containers", "info"]).arg(id))
            .await
        {
            Ok(json) => match parse_ctr_container_info(&json) {
                Some(c) => facts.containers.push(c),
                None => facts
                    .errors
                    .push(format!("unreadable `ctr containers info {id}` output")),
            },
            Err(e) => facts.errors.push(e.to_string()),
        }
    }
    let mut all_ids = facts.ids();
    all_ids.extend(ids);
    all_ids.extend(extra_ids.iter().cloned());
    all_ids.sort();
    all_ids.dedup();
    // `ctr task ls` asks every shim for its state; a stopped shim costs
    // containerd a 2 s deadline per task, hence the generous timeout.
    match node
        .run(
            node.ctr()
                .args(["tasks", "ls"])
                .timeout(std::time::Duration::from_secs(60)),
        )
        .await
    {
        Ok(out) => {
            facts.tasks = parse_ctr_tasks(&out)
                .into_iter()
                .filter(|t| all_ids.contains(&t.id))
                .collect()
        }
        Err(e) => facts.errors.push(e.to_string()),
    }
    let address = node.containerd_address().display().to_string();
    match node.processes().await {
        Ok(procs) => {
            for p in procs.iter().filter(|p| p.state != 'Z') {
                let Some((id, namespace, addr)) = parse_shim_cmdline(&p.cmdline) else {
                    continue;
                };
                if addr.as_deref() == Some(address.as_str()) && all_ids.contains(&id) {
                    facts.shims.push(ShimFact {
                        pid: p.pid,
                        start_time: p.start_time,
                        state: p.state,
                        id,
                        namespace,
                        address: addr,
                        command: p.command_line(),
                    });
                }
            }
        }
        Err(e) => facts.errors.push(e.to_string()),
    }
    facts
}

//! [`ClusterError`]: the one error of the cluster layer, for every
//! provider and every step (kube-client's shape: one enum, each variant
//! with what was being done and the source kept whole).

use std::{net::Ipv4Addr, path::PathBuf};

use super::{
    local::layout::MAX_SLOTS, local::preflight::INOTIFY_PER_CLUSTER, provider::ProviderKind,
};
use crate::{components::ComponentsError, exec::RunError, node::NodeError, wait::WaitTimeout};

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    // What the caller asked for.
    #[error(
        "cluster name '{0}' is not valid: use 1-30 characters of a-z, 0-9 and '-', not starting or ending with '-'"
    )]
    InvalidName(String),
    #[error(
        "no {provider} cluster named '{name}' made by unstuck; `unstuck cluster list` shows the clusters it made"
    )]
    NotFound {
        provider: ProviderKind,
        name: String,
    },
    #[error(
        "cluster '{name}' already exists ({dir}); use it with --kubeconfig {dir}/admin.kubeconfig, or remove it with `unstuck cluster down {name}`"
    )]
    Exists { name: String, dir: PathBuf },
    #[error(
        "kind cluster '{0}' already exists; remove it with `unstuck cluster down --provider kind {0}` (or `kind delete cluster --name {0}` if unstuck did not make it)"
    )]
    KindExists(String),

    // What the machine lacks (each names its fix).
    #[error(
        "the local cluster must run as root (it mounts, creates links and runs the kubelet); rerun with sudo"
    )]
    NotRoot,
    #[error(
        "cgroup layout not supported: {detail}.\n  The kubelet needs the cgroup v1 controllers cpu, cpuacct, cpuset, memory and pids \
         mounted under /sys/fs/cgroup (or a cgroup v2 unified hierarchy)"
    )]
    Cgroups { detail: String },
    #[error(
        "port {port} on {addr} (for {component}) is already in use.\n  Another program or an unstuck cluster listens there: \
         `unstuck cluster list` shows clusters; stop the other program or use another slot (--slot)"
    )]
    PortInUse {
        component: &'static str,
        addr: Ipv4Addr,
        port: u16,
    },
    #[error(
        "too few inotify instances left for another cluster: {in_use} of fs.inotify.max_user_instances={limit} are open, \
         and a local cluster needs about {INOTIFY_PER_CLUSTER} (its kubelet exits with \"inotify_init: too many open files\" otherwise).\n  \
         Raise the limit: sudo sysctl -w fs.inotify.max_user_instances=1024 (ci/setup.sh does this and keeps it in /etc/sysctl.d/)"
    )]
    InotifyExhausted { in_use: usize, limit: usize },
    #[error(
        "all {MAX_SLOTS} local cluster slots are in use; `unstuck cluster list` shows them and `unstuck cluster down NAME` frees one"
    )]
    NoFreeSlot,
    #[error(transparent)]
    Components(#[from] ComponentsError),
    #[error(
        "the kind CLI is not built ({path}).\n  Install Docker, build kind and the offline node image with:\n    sudo ci/kind/setup.sh --k8s-version {version}"
    )]
    KindMissing { path: PathBuf, version: String },
    #[error(
        "the Docker engine does not answer: {source}\n  Install and start it (and build the node image) with:\n    sudo ci/kind/setup.sh --k8s-version {version}"
    )]
    DockerDown {
        version: String,
        #[source]
        source: RunError,
    },
    #[error(
        "node image {image} is not in Docker (unstuck never pulls one).\n  Build it offline with:\n    sudo ci/kind/setup.sh --k8s-version {version}"
    )]
    ImageMissing { image: String, version: String },

    // A cluster's record.
    #[error("failed to {action} {path}: {source}")]
    StateIo {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cluster state {path} is unreadable ({source}); remove the directory with `unstuck cluster down {name}`"
    )]
    StateCorrupt {
        path: PathBuf,
        name: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("kind cluster record {path} is unreadable: {source}")]
    KindState {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    // Making a cluster.
    #[error("failed to generate {what}: {source}")]
    PkiGenerate {
        what: String,
        #[source]
        source: rcgen::Error,
    },
    #[error("failed to write {path}: {source}")]
    PkiWrite {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to open log file {path}: {source}")]
    ProcessLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to start {component} ({program}): {source}")]
    Spawn {
        component: String,
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the supervisor has no command line for {0}")]
    NoCommand(String),
    #[error("{component} (pid {pid}) exited right after it was started")]
    ExitedAtStart { component: String, pid: i32 },
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
    #[error(transparent)]
    Wait(#[from] WaitTimeout),
    #[error("kind cluster '{name}': {source}\n  kind's logs of it: {logs}")]
    Create {
        name: String,
        logs: PathBuf,
        #[source]
        source: Box<ClusterError>,
    },
    #[error("kind cluster '{name}': {source}\n  and kind's logs of it could not be kept: {logs}")]
    CreateNoLogs {
        name: String,
        #[source]
        source: Box<ClusterError>,
        logs: Box<ClusterError>,
    },

    // Talking to it.
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("failed to build a client from {path}: {source}")]
    Client {
        path: PathBuf,
        #[source]
        source: kube::Error,
    },
    #[error("kubernetes API call failed while {what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("the node of {provider} cluster '{name}': {source}")]
    Node {
        provider: ProviderKind,
        name: String,
        #[source]
        source: NodeError,
    },
    #[error(transparent)]
    NodeAccess(#[from] NodeError),

    // The machine.
    #[error(transparent)]
    Command(#[from] RunError),
    #[error("{what} failed: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("copying {from} to {to}: {source}")]
    Logs {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// [`ClusterError::Io`] of `what`, for `map_err`.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClusterError {
    let what = what.into();
    move |source| ClusterError::Io { what, source }
}

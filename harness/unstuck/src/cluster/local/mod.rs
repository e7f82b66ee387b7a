//! The `local` provider: a single-node cluster of real Kubernetes
//! components (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler, containerd, kubelet) run as processes on this machine,
//! with no Docker and no registry.

mod admin;
pub mod config;
pub mod kcm_metrics;
pub mod layout;
mod network;
mod node;
pub mod pki;
pub mod preflight;
pub mod process;
mod provider;
pub mod state;
pub mod supervisor;
pub mod teardown;
mod up;

use std::{
    fs,
    path::PathBuf,
    process::{Child, ChildStdin},
    time::{Duration, Instant},
};

use kube::Client;

pub use self::{
    admin::{LocalStatus, down, list, reap, sweep_stale},
    layout::Layout,
    node::LocalNode,
    process::Lifetime,
    provider::LocalProvider,
    state::ClusterState,
    teardown::{TeardownReport, leftovers},
};
use self::{
    supervisor::{ExitLog, Supervisor},
    up::Starting,
};
use crate::{
    cluster::ClusterError,
    components::{self, Binaries},
    node::ProcRef,
};

use crate::cluster::error::io;

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
    pub async fn up(opts: UpOptions) -> Result<Self, ClusterError> {
        crate::cluster::name::validate_name(&opts.name)?;
        preflight::check_root()?;
        preflight::check_cgroups()?;
        preflight::check_inotify()?;
        let bins = components::locate(&opts.k8s_version)?;
        let root = state::state_root();
        let started = Instant::now();

        let layout = {
            let _lock = state::lock_root(&root)?;
            admin::sweep_stale_locked(&root).await;
            let dir = root.join(&opts.name);
            if dir.exists() {
                return Err(ClusterError::Exists {
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
                Lifetime::Owned => ProcRef::of_pid(std::process::id() as i32),
                Lifetime::Detached => None,
            };
            ClusterState {
                layout: layout.clone(),
                k8s_version: opts.k8s_version.clone(),
                created_at: k8s_openapi::jiff::Timestamp::now().to_string(),
                owner,
                creator: ProcRef::of_pid(std::process::id() as i32),
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
            starting.reaper = Some(up::spawn_reaper(program, &layout.dir)?);
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
        tracing::debug!(target: crate::STEP_LOG, "teardown of cluster '{}' begins", self.state.layout.name);
        let mut report = teardown::teardown(&self.state.layout.dir).await;
        for c in &mut self.children {
            if let Err(e) = c.wait() {
                report
                    .errors
                    .push(format!("waiting for component pid {}: {e}", c.id()));
            }
        }
        if let Some((mut child, stdin)) = self.reaper.take() {
            // The directory is gone, so the reaper finds nothing left to do.
            drop(stdin);
            if let Err(e) = child.wait() {
                report
                    .errors
                    .push(format!("waiting for the reaper {}: {e}", child.id()));
            }
        }
        report
    }
}

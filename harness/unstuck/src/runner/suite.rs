//! Running many scenarios: independent ones side by side on one shared
//! cluster, and the ones that must not share (a dead APIService blocks
//! every namespace deletion; a node fault stalls every pod on the node)
//! isolated — on a cluster of their own when the provider can make one
//! (local or kind), or else with the shared cluster to themselves.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Instant,
};

use kube::Client;
use tokio::sync::{RwLock, Semaphore, watch};
use unstuck_core::scenario::Scenario;

use super::{RunContext, run_scenario_until};
use crate::{
    cluster::{
        exits::ExitLog,
        provider::{AnyProvider, Created, ProviderInfo, cancelled, create_unless},
    },
    node::AnyNode,
    report::{IsolatedCluster, RunReport, ScenarioReport},
};

/// What a suite runs against and where it writes.
#[derive(Clone)]
pub struct SuiteOptions {
    pub client: Client,
    pub fixtures_dir: PathBuf,
    pub out_dir: PathBuf,
    pub node: Option<Arc<AnyNode>>,
    /// Scenarios side by side on the shared cluster, at most.
    pub parallelism: usize,
    /// Where scenarios that must run alone go; `None` serialises them on
    /// the shared cluster (a cluster met through a kubeconfig).
    pub own_clusters: Option<OwnClusters>,
    pub cluster: String,
    pub k8s_version: String,
    pub provider: ProviderInfo,
    /// `i/n` when this run is one CI job's part of the suite.
    pub shard: Option<String>,
    /// The shared cluster's control-plane exits (see [`RunContext`]).
    pub cluster_exits: ExitLog,
    /// See [`RunContext::journal`].
    pub journal: Option<super::journal::JournalTarget>,
}

/// Gives parallel scenarios shared access and serial ones exclusive access.
#[derive(Clone, Default)]
pub struct ExclusiveGate(Arc<RwLock<()>>);

impl ExclusiveGate {
    /// Runs `f` alone (`exclusive`) or beside other non-exclusive runs.
    pub async fn run<T>(&self, exclusive: bool, f: impl Future<Output = T>) -> T {
        if exclusive {
            let _g = self.0.write().await;
            f.await
        } else {
            let _g = self.0.read().await;
            f.await
        }
    }
}

/// Throwaway clusters for the scenarios that must run alone: each gets a
/// fresh one (ten-odd seconds to boot on the local provider, beside the
/// others), so a node fault or a cluster-wide blocker can only ever touch
/// its own scenario, and no scenario waits for another to finish.
#[derive(Clone)]
pub struct OwnClusters {
    /// The provider that makes them.
    provider: AnyProvider,
    /// Cluster `i` of the suite is `<prefix>-<i>`.
    prefix: String,
    /// Own clusters alive at once, at most (each is a full control plane
    /// and node: memory and CPU bound the number, not ports).
    slots: Arc<Semaphore>,
}

impl OwnClusters {
    /// Cluster `i` of the suite is `<prefix>-<i>`, which must stay a
    /// valid cluster name.
    pub fn new(provider: AnyProvider, prefix: impl Into<String>, at_once: usize) -> Self {
        Self {
            provider,
            prefix: prefix.into(),
            slots: Arc::new(Semaphore::new(at_once.max(1))),
        }
    }

    /// Brings up a cluster of its own for `scenario`, runs it there, keeps
    /// the cluster's component logs with the scenario's evidence and tears
    /// the cluster down. Anything the teardown leaves behind is reported
    /// as leaked, so it fails the scenario's cleanup check.
    ///
    /// Run this on the runtime's worker threads (a spawned task), never on
    /// a thread that ends before the scenario does: the cluster's
    /// components die with the thread that started them.
    pub async fn run_alone(
        &self,
        index: usize,
        scenario: &Scenario,
        fixtures_dir: &Path,
        out_dir: PathBuf,
        cancel: watch::Receiver<bool>,
    ) -> ScenarioReport {
        let _slot = self.slots.acquire().await.expect("semaphore never closed");
        let name = format!("{}-{index}", self.prefix);
        let started = Instant::now();
        let created = create_unless(self.provider.as_ref(), &name, cancelled(cancel.clone())).await;
        let cluster = match created {
            Ok(Created::Up(c)) => c,
            Ok(Created::Stopped(teardown)) => {
                return ScenarioReport::stopped_before_start(
                    scenario,
                    out_dir,
                    format!(
                        "the run was interrupted (Ctrl-C or SIGTERM) while its own {} cluster '{name}' was starting; the cluster was deleted: {teardown}",
                        self.provider.kind()
                    ),
                );
            }
            Err(e) => {
                return ScenarioReport::lost(
                    scenario,
                    out_dir,
                    format!(
                        "its own {} cluster '{name}' did not come up: {e}",
                        self.provider.kind()
                    ),
                );
            }
        };
        let boot_ms = started.elapsed().as_millis();
        let ctx = RunContext {
            client: cluster.client(),
            fixtures_dir: fixtures_dir.to_path_buf(),
            out_dir: out_dir.clone(),
            node: Some(cluster.node()),
            cluster_exits: cluster.component_exits(),
            journal: None,
        };
        let mut report = run_scenario_until(&ctx, scenario, cancel).await;
        if let Err(e) = cluster.export_logs(&out_dir.join("cluster-logs")).await {
            tracing::warn!("keeping the logs of cluster {name}: {e}");
        }
        let teardown = cluster.delete().await;
        for p in &teardown.problems {
            report
                .cleanup
                .leaked
                .push(format!("teardown of cluster {name}: {p}"));
        }
        report.isolated = Some(IsolatedCluster {
            name,
            boot_ms,
            teardown: teardown.to_string(),
        });
        report
    }
}

/// Runs each of `scenarios` (with its position in the suite) on a
/// cluster of its own, side by side as far as `own` allows; the reports
/// come back with their positions. Spawned tasks: the clusters' components
/// are started from the runtime's worker threads.
pub async fn run_isolated(
    own: OwnClusters,
    scenarios: Vec<(usize, Scenario)>,
    fixtures_dir: PathBuf,
    out_dir: PathBuf,
    cancel: watch::Receiver<bool>,
) -> Vec<(usize, ScenarioReport)> {
    let tasks: Vec<_> = scenarios
        .into_iter()
        .map(|(index, scenario)| {
            let (own, fixtures, cancel) = (own.clone(), fixtures_dir.clone(), cancel.clone());
            let out = out_dir.join(scenario.name.as_str());
            let task = tokio::spawn({
                let (scenario, out) = (scenario.clone(), out.clone());
                async move {
                    eprintln!(
                        "[unstuck] start  {} (on a cluster of its own)",
                        scenario.name.as_str()
                    );
                    let r = own
                        .run_alone(index, &scenario, &fixtures, out, cancel)
                        .await;
                    announce(&r);
                    r
                }
            });
            (index, scenario, out, task)
        })
        .collect();
    let mut reports = Vec::new();
    for (index, scenario, out, task) in tasks {
        reports.push((
            index,
            task.await.unwrap_or_else(|e| {
                ScenarioReport::lost(&scenario, out, format!("the scenario's task failed: {e}"))
            }),
        ));
    }
    reports
}

fn announce(r: &ScenarioReport) {
    eprintln!(
        "[unstuck] {}  {} ({:.1} s)",
        if r.passed() { "pass " } else { "FAIL " },
        r.name(),
        r.duration_ms as f64 / 1000.0
    );
}

/// Runs every scenario; `cancel` turning true stops them (each still cleans up).
pub async fn run_suite(
    opts: &SuiteOptions,
    scenarios: Vec<Scenario>,
    cancel: watch::Receiver<bool>,
) -> RunReport {
    let started = Instant::now();
    let started_at = k8s_openapi::jiff::Timestamp::now().to_string();
    let gate = ExclusiveGate::default();
    let slots = Arc::new(Semaphore::new(opts.parallelism.max(1)));
    let mut tasks = Vec::new();
    let mut lost_reports = Vec::new();
    for (index, scenario) in scenarios.into_iter().enumerate() {
        let out_dir = opts.out_dir.join(scenario.name.as_str());
        lost_reports.push((scenario.clone(), out_dir.clone()));
        let ctx = RunContext {
            client: opts.client.clone(),
            fixtures_dir: opts.fixtures_dir.clone(),
            out_dir: out_dir.clone(),
            node: opts.node.clone(),
            cluster_exits: opts.cluster_exits.clone(),
            journal: opts.journal.clone(),
        };
        let (gate, slots, cancel) = (gate.clone(), slots.clone(), cancel.clone());
        let own = opts.own_clusters.clone().filter(|_| scenario.runs_alone());
        tasks.push(tokio::spawn(async move {
            let r = match own {
                Some(own) => {
                    eprintln!(
                        "[unstuck] start  {} (on a cluster of its own)",
                        scenario.name.as_str()
                    );
                    own.run_alone(index, &scenario, &ctx.fixtures_dir, out_dir, cancel)
                        .await
                }
                None => {
                    let _slot = slots.acquire_owned().await.expect("semaphore never closed");
                    let exclusive = scenario.runs_alone();
                    gate.run(exclusive, async {
                        eprintln!(
                            "[unstuck] start  {}{}",
                            scenario.name.as_str(),
                            if exclusive { " (alone)" } else { "" }
                        );
                        run_scenario_until(&ctx, &scenario, cancel).await
                    })
                    .await
                }
            };
            announce(&r);
            r
        }));
    }
    let ticker = super::progress::start_ticker();
    let mut reports: Vec<ScenarioReport> = Vec::new();
    for (t, (scenario, out_dir)) in tasks.into_iter().zip(lost_reports) {
        match t.await {
            Ok(r) => reports.push(r),
            Err(e) => reports.push(ScenarioReport::lost(
                &scenario,
                out_dir,
                format!("the scenario's task failed: {e}"),
            )),
        }
    }
    if let Some(t) = ticker {
        t.abort();
    }
    RunReport {
        started_at,
        cluster: opts.cluster.clone(),
        k8s_version: opts.k8s_version.clone(),
        provider: opts.provider.clone(),
        shard: opts.shard.clone(),
        duration_ms: started.elapsed().as_millis(),
        scenarios: reports,
    }
}

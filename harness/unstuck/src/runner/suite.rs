//! Running many scenarios against one cluster: independent ones side by
//! side, the ones that must run alone (a dead APIService blocks every
//! namespace deletion; node faults touch a shared node) with the cluster
//! to themselves.

use std::{path::PathBuf, sync::Arc, time::Instant};

use kube::Client;
use tokio::sync::{RwLock, Semaphore, watch};
use unstuck_core::scenario::Scenario;

use super::{RunContext, ScenarioReport, run_scenario_until};
use crate::report::RunReport;

/// What a suite runs against and where it writes.
#[derive(Clone)]
pub struct SuiteOptions {
    pub client: Client,
    pub fixtures_dir: PathBuf,
    pub out_dir: PathBuf,
    pub kubelet_log: Option<PathBuf>,
    pub node: Option<Arc<crate::node::LocalNode>>,
    pub parallelism: usize,
    pub cluster: String,
    pub k8s_version: String,
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
    for scenario in scenarios {
        lost_reports.push((scenario.clone(), opts.out_dir.join(scenario.name.as_str())));
        let ctx = RunContext {
            client: opts.client.clone(),
            fixtures_dir: opts.fixtures_dir.clone(),
            out_dir: opts.out_dir.join(scenario.name.as_str()),
            kubelet_log: opts.kubelet_log.clone(),
            node: opts.node.clone(),
        };
        let (gate, slots, cancel) = (gate.clone(), slots.clone(), cancel.clone());
        tasks.push(tokio::spawn(async move {
            let _slot = slots.acquire_owned().await.expect("semaphore never closed");
            let exclusive = scenario.runs_alone();
            gate.run(exclusive, async {
                eprintln!(
                    "[unstuck] start  {}{}",
                    scenario.name.as_str(),
                    if exclusive { " (alone)" } else { "" }
                );
                let r = run_scenario_until(&ctx, &scenario, cancel).await;
                eprintln!(
                    "[unstuck] {}  {} ({:.1} s)",
                    if r.passed() { "pass " } else { "FAIL " },
                    r.name,
                    r.duration_ms as f64 / 1000.0
                );
                r
            })
            .await
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
        duration_ms: started.elapsed().as_millis(),
        scenarios: reports,
    }
}

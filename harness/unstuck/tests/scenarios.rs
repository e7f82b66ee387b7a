//! Every scenario in scenarios/ as a named test, as `unstuck run` lays
//! them out: each in its own namespaces on one shared real local cluster,
//! all side by side, and the ones that must run alone (node faults,
//! cluster-wide blockers) each on a local cluster of its own.
//! After the run the cluster is torn down and must leave nothing behind.
//! The JSON and JUnit reports land in target/unstuck-test-runs/.

use std::{
    process::ExitCode,
    sync::{Arc, Mutex},
};

use libtest_mimic::{Arguments, Failed, Trial};
use unstuck::{
    cluster::{
        local::{self, LocalCluster, LocalNode, UpOptions},
        provider::{CreateOptions, ProviderKind},
        providers::provider,
    },
    node::AnyNode,
    report::RunReport,
    runner::{RunContext, ScenarioReport, run_scenario, suite::OwnClusters},
};

mod common;

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // Scenarios mostly wait on Kubernetes, not on the CPU: run them all
    // side by side unless told otherwise (libtest's default is one per core).
    args.test_threads.get_or_insert(16);
    let root = common::repo_root();
    let fixtures = root.join("fixtures");
    let scenarios = match unstuck::core::scenario::load_dir(&root.join("scenarios")) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("scenarios do not load:\n{e}");
            return ExitCode::FAILURE;
        }
    };
    for s in &scenarios {
        if let Err(e) = s.validate_fixtures(&fixtures) {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    }
    let names: Vec<String> = scenarios
        .iter()
        .map(|s| format!("scenario::{}", s.name.as_str()))
        .collect();
    if args.list {
        let trials = names
            .into_iter()
            .map(|n| Trial::test(n, || Ok(())))
            .collect();
        return libtest_mimic::run(&args, trials).exit_code();
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let cluster_name = common::cluster_name("it-scenarios");
    let mut opts = UpOptions::new(cluster_name.clone());
    opts.reaper = Some(env!("CARGO_BIN_EXE_unstuck").into());
    // block_on polls on this (main) thread, which outlives the cluster: the
    // components' parent-death signal is tied to it.
    let cluster = match rt.block_on(LocalCluster::up(opts)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("local cluster did not come up: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stamp = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let out_dir = root.join("target/unstuck-test-runs").join(stamp);
    // As `unstuck run` does: a scenario that must run alone gets a cluster
    // of its own, so it neither waits for nor disturbs the others.
    let own = CreateOptions::owned(
        &UpOptions::new(cluster_name.clone()).k8s_version,
        Some(env!("CARGO_BIN_EXE_unstuck").into()),
    );
    // Two at once (`unstuck run` has four): beside the other test binaries
    // a 2-core machine is short of CPU already (see ci/run-tests.sh).
    let own = OwnClusters::new(provider(ProviderKind::Local, own), cluster_name.clone(), 2);
    let node: Arc<AnyNode> = Arc::new(LocalNode::of(&cluster));
    let reports: Arc<Mutex<Vec<ScenarioReport>>> = Arc::default();

    let trials = scenarios
        .into_iter()
        .zip(names)
        .enumerate()
        .map(|(index, (scenario, name))| {
            let ctx = RunContext {
                client: cluster.client(),
                fixtures_dir: fixtures.clone(),
                out_dir: out_dir.join(scenario.name.as_str()),
                node: Some(node.clone()),
                cluster_exits: cluster.component_exits(),
                journal: None,
            };
            let (handle, reports) = (rt.handle().clone(), reports.clone());
            let own = own.clone();
            Trial::test(name, move || {
                let report = if scenario.runs_alone() {
                    // Spawned, so the scenario's own cluster is started from
                    // a runtime worker thread, which outlives this test
                    // thread (its components die with the thread that
                    // started them).
                    let (scenario, out_dir) = (scenario.clone(), ctx.out_dir.clone());
                    let fixtures = ctx.fixtures_dir.clone();
                    let (_keep, never) = tokio::sync::watch::channel(false);
                    let task = handle.spawn(async move {
                        own.run_alone(index, &scenario, &fixtures, out_dir, never)
                            .await
                    });
                    match handle.block_on(task) {
                        Ok(r) => r,
                        Err(e) => {
                            return Err(Failed::from(format!("the scenario's task failed: {e}")));
                        }
                    }
                } else {
                    handle.block_on(run_scenario(&ctx, &scenario))
                };
                let verdict = if report.passed() {
                    Ok(())
                } else {
                    let one = RunReport {
                        started_at: String::new(),
                        cluster: String::new(),
                        k8s_version: String::new(),
                        provider: Default::default(),
                        shard: None,
                        duration_ms: report.duration_ms,
                        scenarios: vec![report.clone()],
                    };
                    Err(Failed::from(one.terminal()))
                };
                let leaked = report.cleanup.leaked.clone();
                reports.lock().expect("reports lock").push(report);
                if verdict.is_ok() && !leaked.is_empty() {
                    return Err(Failed::from(format!(
                        "scenario passed but its cleanup leaked: {leaked:?}"
                    )));
                }
                verdict
            })
        })
        .collect();

    let conclusion = libtest_mimic::run(&args, trials);

    let run = RunReport {
        started_at: String::new(),
        cluster: cluster_name,
        k8s_version: cluster.k8s_version().to_string(),
        provider: Default::default(),
        shard: None,
        duration_ms: 0,
        scenarios: std::mem::take(&mut *reports.lock().expect("reports lock")),
    };
    if let Err(e) = run.write_all(&out_dir) {
        eprintln!("writing reports to {}: {e}", out_dir.display());
    }
    let layout = cluster.layout().clone();
    let teardown = rt.block_on(cluster.down());
    let left = local::leftovers(&layout);
    eprintln!(
        "scenario cluster down: {teardown}; reports in {}",
        out_dir.display()
    );
    if !left.is_empty() || !teardown.errors.is_empty() {
        eprintln!(
            "the scenario cluster left things behind: {left:?} {:?}",
            teardown.errors
        );
        return ExitCode::FAILURE;
    }
    conclusion.exit_code()
}

//! `unstuck run`: a throwaway cluster of the chosen provider (local or
//! kind; or, explicitly allowed, an existing one), every scenario
//! injected, doctored and proven recovered, and the reports.

mod existing;

use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context, Result};
use unstuck::cluster::provider::{CreateOptions, ProviderKind};
use unstuck::cluster::providers::provider;

use existing::{existing_suite, guard_existing, refuse_cluster_wide};

/// `unstuck run`'s exit codes, in its `--help`.
pub const RUN_EXIT_CODES_HELP: &str = "Exit codes:
  0    every scenario passed (or this shard had none)
  1    a scenario failed, or the run could not start (no components built,
       a scenario file that does not load, no cluster); the reports say which
  2    usage: the command line is wrong
  130  interrupted twice (Ctrl-C): cleanup was cut short; `unstuck cluster gc`
       removes what is left. Interrupted once, the run cleans up and exits 1;
       the scenarios it stopped are reported interrupted (JUnit: skipped,
       with why), not failed";

#[derive(clap::Args)]
#[command(after_help = RUN_EXIT_CODES_HELP)]
pub struct RunArgs {
    /// Directory of scenario files.
    #[arg(long, default_value = "scenarios")]
    scenarios: PathBuf,
    /// Directory the scenarios' `apply` paths are relative to.
    #[arg(long, default_value = "fixtures")]
    fixtures: PathBuf,
    /// Only scenarios whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Where the run's folder (reports, evidence, backups) is created.
    #[arg(long, default_value = "unstuck-runs")]
    out: PathBuf,
    /// Which provider makes the throwaway clusters: `local` (real
    /// components as processes here) or `kind` (the offline node image
    /// that ci/kind/setup.sh builds; never pulled).
    #[arg(long, value_enum, env = "UNSTUCK_PROVIDER", default_value_t = ProviderKind::Local)]
    provider: ProviderKind,
    /// Run against an existing cluster instead of a throwaway one.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The --kubeconfig context to use instead of its current one (as
    /// `kubectl --context`); --allow-existing-cluster must name it.
    #[arg(long, requires = "kubeconfig")]
    context: Option<String>,
    /// Lets scenarios create, break and repair objects on a --kubeconfig
    /// cluster unstuck did not create; the value must be that
    /// kubeconfig's current context, exactly.
    #[arg(long, value_name = "CONTEXT", num_args = 0..=1, default_missing_value = "")]
    allow_existing_cluster: Option<String>,
    /// On a --kubeconfig cluster, run these scenarios although they
    /// register something every request or discovery in the cluster goes
    /// through (an APIService, an admission webhook or policy): by name,
    /// repeatable or comma-separated. Without it they are refused, and
    /// the refusal lists them and what each adds.
    #[arg(long, value_name = "SCENARIO", value_delimiter = ',')]
    allow_cluster_wide: Vec<String>,
    /// Leave out the scenarios that inject node faults (they need the
    /// node access the local and kind providers give; on a --kubeconfig
    /// cluster they are refused otherwise).
    #[arg(long)]
    without_node_scenarios: bool,
    /// Kubernetes version of the local cluster; a comma list (or
    /// `supported`) runs the suite once per version and reports a matrix
    /// with what changed between them.
    #[arg(long, env = "UNSTUCK_K8S_VERSION", default_value = unstuck::components::DEFAULT_K8S_VERSION)]
    k8s_version: String,
    /// Scenarios run side by side on the shared cluster, at most.
    #[arg(long, default_value_t = 8)]
    parallel: usize,
    /// Scenarios that must run alone (node faults, cluster-wide blockers)
    /// each get a cluster of their own, at most this many at once; 0 runs
    /// them one at a time on the shared cluster instead.
    #[arg(long, value_name = "N", default_value_t = 4)]
    clusters: usize,
    /// Run only part i of n of the suite (counting from 1), for n CI jobs
    /// that together run every scenario once; `unstuck report merge`
    /// joins their reports.
    #[arg(long, value_name = "I/N")]
    shard: Option<unstuck::core::scenario::Shard>,
}

pub async fn run(args: RunArgs) -> Result<ExitCode> {
    if args.kubeconfig.is_some() && args.provider != ProviderKind::Local {
        anyhow::bail!(
            "--provider {} makes throwaway clusters; --kubeconfig runs on an existing one: give one of them",
            args.provider
        );
    }
    // Before anything else: which cluster, and may it be changed.
    let existing = match &args.kubeconfig {
        Some(path) => Some(
            guard_existing(
                path,
                args.context.as_deref(),
                args.allow_existing_cluster.as_deref(),
            )
            .await?,
        ),
        None => None,
    };
    let versions = unstuck::report::matrix::parse_versions(
        &args.k8s_version,
        unstuck::components::SUPPORTED_K8S_VERSIONS,
    )?;
    if existing.is_some() && versions.len() > 1 {
        anyhow::bail!(
            "--k8s-version with several versions makes local clusters of each; a --kubeconfig cluster has the one version it runs"
        );
    }
    let scenarios = select_scenarios(&args, existing.is_some())?;
    if existing.is_some() {
        refuse_cluster_wide(&args, &scenarios)?;
    }
    let stamp = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    // Absolute once, here: steps write files that others read relative to
    // another directory (the container step's registration, the apply
    // step's fixtures), and `--out` may be relative (ci/main.sh's is).
    let out_dir = std::path::absolute(&args.out)
        .with_context(|| format!("resolving --out {}", args.out.display()))?
        .join(&stamp);
    if scenarios.is_empty() {
        // More CI jobs than scenarios: this job's part is empty, which is
        // not a failure; its (empty) report still merges.
        let report = unstuck::report::RunReport {
            started_at: k8s_openapi::jiff::Timestamp::now().to_string(),
            cluster: "none (no scenario to run)".into(),
            k8s_version: versions.join(","),
            provider: Default::default(),
            shard: args.shard.map(|s| s.to_string()),
            duration_ms: 0,
            scenarios: Vec::new(),
        };
        report.write_all(&out_dir).context("writing reports")?;
        eprintln!(
            "[unstuck] nothing to run in this shard; wrote an empty report to {}",
            out_dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let fixtures = std::fs::canonicalize(&args.fixtures)
        .with_context(|| format!("fixtures dir {}", args.fixtures.display()))?;

    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        super::wait_for_shutdown_signal().await;
        eprintln!("[unstuck] interrupted: stopping scenarios, cleaning up (Ctrl-C again to force)");
        let _ = cancel_tx.send(true);
        super::wait_for_shutdown_signal().await;
        std::process::exit(130);
    });

    let report = if let Some((client, target)) = existing {
        existing_suite(
            &args, client, &target, scenarios, &out_dir, fixtures, cancel_rx,
        )
        .await
    } else if versions.len() > 1 {
        return matrix_run(&args, &versions, scenarios, &out_dir, fixtures, cancel_rx).await;
    } else {
        match provider_suite(
            &args,
            &versions[0],
            scenarios.clone(),
            &out_dir,
            fixtures,
            cancel_rx,
        )
        .await
        {
            Ok(report) => report,
            Err(e) => {
                // CI reads the reports: they say why nothing ran.
                unstarted(&args, &versions[0], &scenarios, &out_dir, &e);
                return Err(e);
            }
        }
    };
    let files = report.write_all(&out_dir).context("writing reports")?;
    print!("{}", report.terminal());
    for f in files {
        eprintln!("[unstuck] wrote {}", f.display());
    }
    // An interrupted scenario has no verdict: not a pass.
    Ok(if report.all_passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Writes the reports of a run that failed before its first scenario (no
/// cluster, say): every scenario failed at step 0 with that reason.
fn unstarted(
    args: &RunArgs,
    version: &str,
    scenarios: &[unstuck::core::scenario::Scenario],
    out_dir: &std::path::Path,
    error: &anyhow::Error,
) {
    let reason = format!("the run could not start: {error:#}");
    let report = unstuck::report::RunReport {
        started_at: k8s_openapi::jiff::Timestamp::now().to_string(),
        cluster: format!("none ({reason})"),
        k8s_version: version.to_owned(),
        provider: unstuck::cluster::provider::ProviderInfo {
            name: args.provider,
            node_image: None,
        },
        shard: args.shard.as_ref().map(|s| s.to_string()),
        duration_ms: 0,
        scenarios: scenarios
            .iter()
            .map(|s| {
                unstuck::runner::ScenarioReport::lost(
                    s,
                    out_dir.join(s.name.as_str()),
                    reason.clone(),
                )
            })
            .collect(),
    };
    match report.write_all(out_dir) {
        Ok(files) => files
            .iter()
            .for_each(|f| eprintln!("[unstuck] wrote {}", f.display())),
        Err(e) => eprintln!("[unstuck] writing the reports of a run that did not start: {e}"),
    }
}

/// The suite once per Kubernetes version, each on throwaway clusters of
/// that version, reported as a matrix with what changed between them.
async fn matrix_run(
    args: &RunArgs,
    versions: &[String],
    scenarios: Vec<unstuck::core::scenario::Scenario>,
    out_dir: &std::path::Path,
    fixtures: PathBuf,
    cancel_rx: tokio::sync::watch::Receiver<bool>,
) -> Result<ExitCode> {
    let mut runs = Vec::new();
    for version in versions {
        eprintln!("[unstuck] === Kubernetes {version} ===");
        let dir = out_dir.join(version);
        runs.push(
            provider_suite(
                args,
                version,
                scenarios.clone(),
                &dir,
                fixtures.clone(),
                cancel_rx.clone(),
            )
            .await
            .with_context(|| format!("the suite on Kubernetes {version}"))?,
        );
        if *cancel_rx.borrow() {
            break;
        }
    }
    let matrix = unstuck::report::matrix::MatrixReport::new(runs);
    let files = matrix.write_all(out_dir).context("writing reports")?;
    Ok(super::show_matrix(&matrix, &files))
}

/// The scenarios this run runs: loaded, then narrowed by `--filter`,
/// `--shard` and `--without-node-scenarios`; on an `existing` cluster
/// (no node access) a scenario that needs a node is refused.
fn select_scenarios(
    args: &RunArgs,
    existing: bool,
) -> Result<Vec<unstuck::core::scenario::Scenario>> {
    let mut scenarios = super::load_scenarios(&args.scenarios, "--scenarios", &args.fixtures)?;
    if let Some(f) = &args.filter {
        scenarios.retain(|s| s.name.contains(f.as_str()));
        if scenarios.is_empty() {
            anyhow::bail!("no scenario name contains '{f}'; `unstuck scenarios` lists them");
        }
    }
    if let Some(shard) = &args.shard {
        let all = scenarios.len();
        scenarios = shard.select(scenarios);
        eprintln!(
            "[unstuck] shard {shard}: {} of {all} scenario(s): {}",
            scenarios.len(),
            scenarios
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if args.without_node_scenarios {
        scenarios.retain(|s| !s.needs_node());
        if scenarios.is_empty() {
            anyhow::bail!("--without-node-scenarios left no scenario to run");
        }
    } else if existing {
        let node: Vec<&str> = scenarios
            .iter()
            .filter(|s| s.needs_node())
            .map(|s| s.name.as_str())
            .collect();
        if !node.is_empty() {
            anyhow::bail!(
                "these scenarios inject node faults and need the node access of the local or kind provider, which a --kubeconfig cluster does not give: {}\n  \
                 Leave them out with --without-node-scenarios (or pick others with --filter)",
                node.join(", ")
            );
        }
    }
    Ok(scenarios)
}

/// The suite on throwaway clusters of `version` made by the chosen
/// provider: the scenarios that must run alone each on a cluster of its
/// own, started at once, while the shared cluster boots beside them for
/// the rest; cluster logs kept, every cluster deleted and checked for
/// leftovers. Reports come back in the suite's order.
async fn provider_suite(
    args: &RunArgs,
    version: &str,
    scenarios: Vec<unstuck::core::scenario::Scenario>,
    out_dir: &std::path::Path,
    fixtures: PathBuf,
    cancel: tokio::sync::watch::Receiver<bool>,
) -> Result<unstuck::report::RunReport> {
    use unstuck::runner::suite::{OwnClusters, SuiteOptions, run_isolated, run_suite};
    let started = std::time::Instant::now();
    let started_at = k8s_openapi::jiff::Timestamp::now().to_string();
    let name = format!("run-{}", unstuck::runner::run_id());
    let reaper = std::env::current_exe().context("locating the unstuck binary for the reaper")?;
    let provider = provider(args.provider, CreateOptions::owned(version, Some(reaper)));
    // A lone scenario has the shared cluster to itself anyway.
    let own = (args.clusters > 0 && scenarios.len() > 1)
        .then(|| OwnClusters::new(provider.clone(), name.clone(), args.clusters));
    let (alone, shared): (Vec<_>, Vec<_>) = scenarios
        .into_iter()
        .enumerate()
        .partition(|(_, s)| own.is_some() && s.runs_alone());
    let isolated = own.map(|own| {
        tokio::spawn(run_isolated(
            own,
            alone,
            fixtures.clone(),
            out_dir.to_path_buf(),
            cancel.clone(),
        ))
    });
    let mut reports: Vec<(usize, unstuck::runner::ScenarioReport)> = Vec::new();
    let mut k8s_version = version.to_string();
    let mut info = provider.info();
    if !shared.is_empty() {
        eprintln!(
            "[unstuck] bringing up {} cluster '{name}' (Kubernetes {version})",
            args.provider
        );
        // The boot's waits are said while they last; the scenarios have
        // their own progress board after it.
        unstuck::waiting::enable();
        let created = unstuck::cluster::provider::create_unless(
            provider.as_ref(),
            &name,
            unstuck::cluster::provider::cancelled(cancel.clone()),
        )
        .await
        .with_context(|| format!("bringing up the {} cluster", args.provider));
        unstuck::waiting::disable();
        match created? {
            unstuck::cluster::provider::Created::Stopped(teardown) => {
                eprintln!(
                    "[unstuck] interrupted while the {} cluster was starting; deleted it: {teardown}",
                    args.provider
                );
                let reason = format!(
                    "the run was interrupted (Ctrl-C or SIGTERM) while its {} cluster was starting; the cluster was deleted: {teardown}",
                    args.provider
                );
                reports.extend(shared.into_iter().map(|(i, s)| {
                    let out = out_dir.join(s.name.as_str());
                    (
                        i,
                        unstuck::runner::ScenarioReport::stopped_before_start(
                            &s,
                            out,
                            reason.clone(),
                        ),
                    )
                }));
            }
            unstuck::cluster::provider::Created::Up(cluster) => {
                eprintln!(
                    "[unstuck] node Ready in {:.1} s; running {} scenario(s) on it",
                    cluster.node_ready().as_secs_f64(),
                    shared.len()
                );
                k8s_version = cluster.k8s_version().to_string();
                info = cluster.info();
                let opts = SuiteOptions {
                    client: cluster.client(),
                    fixtures_dir: fixtures,
                    out_dir: out_dir.to_path_buf(),
                    node: Some(cluster.node()),
                    parallelism: args.parallel,
                    own_clusters: None,
                    cluster: String::new(),
                    k8s_version: k8s_version.clone(),
                    provider: info.clone(),
                    shard: None,
                    cluster_exits: cluster.component_exits(),
                    journal: None,
                };
                let positions: Vec<usize> = shared.iter().map(|(i, _)| *i).collect();
                let run =
                    run_suite(&opts, shared.into_iter().map(|(_, s)| s).collect(), cancel).await;
                reports.extend(positions.into_iter().zip(run.scenarios));
                // Keep the cluster's logs with the run's evidence before they go.
                if let Err(e) = cluster.export_logs(&out_dir.join("cluster-logs")).await {
                    eprintln!("[unstuck] could not keep the cluster's logs: {e}");
                }
                let td = cluster.delete().await;
                eprintln!("[unstuck] {} cluster down: {td}", args.provider);
            }
        }
    }
    if let Some(task) = isolated {
        reports.extend(task.await.context("the isolated scenarios' task failed")?);
    }
    reports.sort_by_key(|(i, _)| *i);
    Ok(unstuck::report::RunReport {
        started_at,
        cluster: format!(
            "{} cluster '{name}' (and '{name}-N' for scenarios that run alone)",
            args.provider
        ),
        k8s_version,
        provider: info,
        shard: args.shard.map(|s| s.to_string()),
        duration_ms: started.elapsed().as_millis(),
        scenarios: reports.into_iter().map(|(_, r)| r).collect(),
    })
}

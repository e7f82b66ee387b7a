//! The `unstuck` command line.

use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use unstuck::cluster::local::{self, Lifetime, LocalCluster, UpOptions};

#[derive(Parser)]
#[command(
    name = "unstuck",
    version,
    about = "Inject, detect and recover Kubernetes objects stuck in Terminating"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Manage local clusters of real Kubernetes components.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Run scenarios: bring up a throwaway local cluster (unless --kubeconfig),
    /// inject each failure, let the doctor recover it, prove recovery, report.
    Run(RunArgs),
    /// Diagnose objects stuck in Terminating on a live cluster and plan (or,
    /// with --apply, carry out) the remedy. Dry-run by default.
    Doctor(DoctorArgs),
    /// List the scenarios in a directory (and check that they load).
    Scenarios {
        #[arg(long, default_value = "scenarios")]
        dir: PathBuf,
        #[arg(long, default_value = "fixtures")]
        fixtures: PathBuf,
    },
    /// Internal: the reaper that tears a cluster down when its harness dies.
    #[command(name = "__reap", hide = true)]
    Reap { dir: PathBuf },
}

#[derive(clap::Args)]
struct RunArgs {
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
    /// Run against an existing cluster instead of a throwaway local one.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Confirms that scenarios may create, break and repair objects on the
    /// --kubeconfig cluster (one unstuck did not create).
    #[arg(long)]
    allow_existing_cluster: bool,
    /// Kubernetes version of the local cluster.
    #[arg(long, env = "UNSTUCK_K8S_VERSION", default_value = unstuck::components::DEFAULT_K8S_VERSION)]
    k8s_version: String,
    /// Scenarios run side by side at most.
    #[arg(long, default_value_t = 4)]
    parallel: usize,
}

#[derive(clap::Args)]
struct DoctorArgs {
    /// Cluster to examine (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Limit to these namespaces (repeatable); default the whole cluster.
    #[arg(long = "namespace", short = 'n')]
    namespaces: Vec<String>,
    /// Carry out the plan. Without it nothing is changed.
    #[arg(long)]
    apply: bool,
    /// With --apply, also change admission webhooks: a webhook that fails
    /// closed while its backend is gone is set to fail open
    /// (failurePolicy Ignore; its manifest is saved first). Without it
    /// that step is shown and skipped.
    #[arg(long, requires = "apply")]
    allow_webhook_changes: bool,
    /// How long a deletion must hang to count as stuck, e.g. 30s, 5m.
    #[arg(long, default_value = "60s")]
    stuck_after: String,
    /// Where manifests are saved before any change.
    #[arg(long, default_value = "unstuck-backups")]
    backup_dir: PathBuf,
    /// Print the full report as JSON.
    #[arg(long)]
    json: bool,
    /// Also examine the node of this local cluster (`unstuck cluster list`)
    /// for pods stuck on a busy volume or a wedged runtime, and heal them
    /// (with --apply) without force.
    #[arg(long)]
    local_cluster: Option<String>,
    /// Save what the doctor saw (the first snapshot) to this JSON file:
    /// evidence, and a fixture for the diagnosis tests.
    #[arg(long)]
    save_snapshot: Option<PathBuf>,
    /// Treat this finalizer key's owner as dead when the evidence leaves it
    /// Unknown (repeatable; exact key). Never overrides a live owner.
    #[arg(long = "assume-dead", value_name = "KEY")]
    assume_dead: Vec<String>,
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Bring a local cluster up and leave it running.
    Up {
        #[arg(default_value = "unstuck")]
        name: String,
        /// Kubernetes version to run (built by ci/setup.sh --k8s-version).
        #[arg(long, env = "UNSTUCK_K8S_VERSION", default_value = unstuck::components::DEFAULT_K8S_VERSION)]
        k8s_version: String,
        /// Seconds to wait for the node to be Ready.
        #[arg(long, default_value_t = 240)]
        timeout: u64,
        /// Keep the cluster only while this command runs: Ctrl-C, SIGTERM or
        /// a crash of this process tears it down.
        #[arg(long)]
        hold: bool,
    },
    /// Show one local cluster (or all).
    Status { name: Option<String> },
    /// List local clusters.
    List,
    /// Stop a local cluster and remove everything it made.
    Down {
        #[arg(default_value = "unstuck")]
        name: String,
    },
    /// Remove clusters whose harness died.
    Gc,
}

#[tokio::main]
async fn main() -> ExitCode {
    unstuck::host::default_sigpipe();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("UNSTUCK_LOG")
                .unwrap_or_else(|_| "info,kube_client=off".into()),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    match run(Cli::parse()).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Reap { dir } => {
            local::reap(&dir).await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cluster { command } => cluster(command).await,
        Command::Run(args) => run_scenarios(args).await,
        Command::Doctor(args) => doctor(args).await,
        Command::Scenarios { dir, fixtures } => {
            let scenarios = load_scenarios(&dir, &fixtures)?;
            for s in &scenarios {
                println!(
                    "{:<32} {:<7} {}",
                    s.name.as_str(),
                    s.catalog_case
                        .map_or("-".to_string(), |c| format!("case {c}")),
                    s.description.as_str()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn load_scenarios(
    dir: &std::path::Path,
    fixtures: &std::path::Path,
) -> Result<Vec<unstuck::core::scenario::Scenario>> {
    let scenarios = unstuck::core::scenario::load_dir(dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    if scenarios.is_empty() {
        anyhow::bail!("no scenario files (*.yaml) in {}", dir.display());
    }
    for s in &scenarios {
        s.validate_fixtures(fixtures)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(scenarios)
}

async fn run_scenarios(args: RunArgs) -> Result<ExitCode> {
    use unstuck::runner::suite::{SuiteOptions, run_suite};
    if let Some(kubeconfig) = &args.kubeconfig
        && !args.allow_existing_cluster
    {
        anyhow::bail!(
            "{} names a cluster unstuck did not create; scenarios create, break and repair objects there.\n  \
             If that is what you want, add --allow-existing-cluster",
            kubeconfig.display()
        );
    }
    let mut scenarios = load_scenarios(&args.scenarios, &args.fixtures)?;
    if let Some(f) = &args.filter {
        scenarios.retain(|s| s.name.contains(f.as_str()));
        if scenarios.is_empty() {
            anyhow::bail!("no scenario name contains '{f}'; `unstuck scenarios` lists them");
        }
    }
    let stamp = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let out_dir = args.out.join(&stamp);
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let fixtures = std::fs::canonicalize(&args.fixtures)
        .with_context(|| format!("fixtures dir {}", args.fixtures.display()))?;

    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        wait_for_shutdown_signal().await;
        eprintln!("[unstuck] interrupted: stopping scenarios, cleaning up (Ctrl-C again to force)");
        let _ = cancel_tx.send(true);
        wait_for_shutdown_signal().await;
        std::process::exit(130);
    });

    let (report, cluster) = if let Some(kubeconfig) = &args.kubeconfig {
        let client = local::client_for(kubeconfig).await?;
        let version = client
            .apiserver_version()
            .await
            .map(|v| v.git_version)
            .unwrap_or_else(|_| "unknown".into());
        let opts = SuiteOptions {
            client,
            fixtures_dir: fixtures,
            out_dir: out_dir.clone(),
            kubelet_log: None,
            node: None,
            parallelism: args.parallel,
            cluster: kubeconfig.display().to_string(),
            k8s_version: version,
        };
        (run_suite(&opts, scenarios, cancel_rx).await, None)
    } else {
        let name = format!("run-{}", unstuck::runner::run_id());
        let mut up = UpOptions::new(&name);
        up.k8s_version = args.k8s_version.clone();
        up.reaper =
            Some(std::env::current_exe().context("locating the unstuck binary for the reaper")?);
        eprintln!(
            "[unstuck] bringing up local cluster '{name}' (Kubernetes {})",
            up.k8s_version
        );
        let cluster = LocalCluster::up(up)
            .await
            .context("bringing up the local cluster")?;
        eprintln!(
            "[unstuck] node Ready in {:.1} s; running {} scenario(s)",
            cluster.timings.node_ready.as_secs_f64(),
            scenarios.len()
        );
        let opts = SuiteOptions {
            client: cluster.client(),
            fixtures_dir: fixtures,
            out_dir: out_dir.clone(),
            kubelet_log: Some(cluster.layout().log_file("kubelet")),
            node: Some(std::sync::Arc::new(unstuck::node::LocalNode::of(&cluster))),
            parallelism: args.parallel,
            cluster: format!("local cluster '{name}'"),
            k8s_version: cluster.k8s_version().to_string(),
        };
        (run_suite(&opts, scenarios, cancel_rx).await, Some(cluster))
    };
    if let Some(cluster) = cluster {
        // Keep the component logs with the run's evidence before they go.
        let logs = cluster.layout().logs_dir();
        let kept = out_dir.join("cluster-logs");
        let _ = std::fs::create_dir_all(&kept);
        for entry in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
            let _ = std::fs::copy(entry.path(), kept.join(entry.file_name()));
        }
        let layout = cluster.layout().clone();
        let td = cluster.down().await;
        let left = local::leftovers(&layout);
        eprintln!("[unstuck] local cluster down: {td}");
        if !left.is_empty() {
            eprintln!("[unstuck] LEFT BEHIND: {}", left.join(", "));
        }
    }
    let files = report.write_all(&out_dir).context("writing reports")?;
    print!("{}", report.terminal());
    for f in files {
        eprintln!("[unstuck] wrote {}", f.display());
    }
    Ok(if report.failed() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn doctor(args: DoctorArgs) -> Result<ExitCode> {
    use unstuck::doctor::{self, DoctorOptions, Scope};
    let client = match &args.kubeconfig {
        Some(p) => local::client_for(p).await?,
        None => {
            let cfg = kube::Config::infer().await.map_err(|_| {
                anyhow::anyhow!("no cluster to examine: pass --kubeconfig PATH or set KUBECONFIG (no ~/.kube/config found)")
            })?;
            local::client_from_config(cfg)?
        }
    };
    let stuck_after: unstuck::core::duration::Duration = args
        .stuck_after
        .parse()
        .map_err(|e| anyhow::anyhow!("--stuck-after: {e}"))?;
    let mut opts = DoctorOptions::dry_run(args.backup_dir.clone());
    opts.apply = args.apply;
    opts.allow_webhook_changes = args.allow_webhook_changes;
    opts.diagnose.stuck_after = stuck_after.as_std();
    opts.diagnose.assume_dead = args.assume_dead.clone();
    if !args.namespaces.is_empty() {
        opts.scope = Scope::Namespaces(args.namespaces.clone());
    }
    let report = doctor::run(&client, &opts).await?;
    if let (Some(path), Some(round)) = (&args.save_snapshot, report.rounds.first()) {
        std::fs::write(path, serde_json::to_string_pretty(&round.snapshot)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let first = report.rounds.first();
    if let Some(r) = first {
        println!(
            "scanned {} types, {} objects in {:.2} s",
            r.collect.types_listed,
            r.collect.objects_seen,
            r.collect.duration.as_secs_f64()
        );
    }
    let node_reports = match &args.local_cluster {
        Some(name) => node_doctor(&client, name, &args, stuck_after.as_std()).await?,
        None => Vec::new(),
    };
    if report.initial_findings().is_empty() && node_reports.is_empty() {
        println!("nothing stuck found");
        return Ok(ExitCode::SUCCESS);
    }
    for f in report.initial_findings() {
        println!("\n{}: {}", f.kind.as_str(), f.summary);
        for e in &f.evidence {
            println!("    {e}");
        }
    }
    if let Some(r) = first
        && !args.apply
    {
        println!("\nplan:\n{}", r.plan.render_dry_run());
    }
    for r in &node_reports {
        println!(
            "\nnode {}: pod {} -> {:?}{}",
            r.node,
            r.pod,
            r.outcome,
            if r.force_used { " (FORCE DELETED)" } else { "" }
        );
        if let Some(f) = &r.initial {
            println!("    {}", f.summary);
            for e in &f.evidence {
                println!("    {e}");
            }
        }
        for step in &r.plan {
            println!(
                "    plan: {}{}: {}",
                if step.force {
                    "[FORCE, last resort] "
                } else {
                    ""
                },
                step.remedy.name(),
                step.why
            );
        }
        for step in &r.steps {
            println!(
                "    did: {}: {}",
                step.step.remedy.name(),
                step.actions.join("; ")
            );
        }
    }
    if args.apply {
        println!("\napplied ({} round(s)):", report.rounds.len());
        for line in report
            .summary_lines()
            .into_iter()
            .filter(|l| l.starts_with("  "))
        {
            println!("{line}");
        }
        for b in report.backups() {
            println!("backup: {}", b.display());
        }
    } else {
        let gated = first.is_some_and(|r| {
            r.plan
                .steps
                .iter()
                .any(|s| s.action.needs_webhook_consent())
        });
        println!(
            "dry run: nothing was changed. Re-run with --apply to carry out the plan{}.",
            if gated {
                " (and --allow-webhook-changes for the webhook step)"
            } else {
                ""
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The node half of `unstuck doctor --local-cluster NAME`.
async fn node_doctor(
    client: &kube::Client,
    cluster: &str,
    args: &DoctorArgs,
    stuck_after: std::time::Duration,
) -> Result<Vec<unstuck::doctor::node::NodeDoctorReport>> {
    use unstuck::doctor::node::{HealOptions, heal_pod, stuck_pods};
    use unstuck::node::Node as _;
    let node = unstuck::node::LocalNode::open(cluster)?;
    let opts = HealOptions {
        apply: args.apply,
        allow_force: false,
        stuck_after,
        ..HealOptions::default()
    };
    let mut reports = Vec::new();
    for p in stuck_pods(client, node.name(), stuck_after).await? {
        if !args.namespaces.is_empty() && !args.namespaces.contains(&p.namespace) {
            continue;
        }
        reports.push(heal_pod(client, &node, &p.namespace, &p.name, &opts).await?);
    }
    Ok(reports)
}

async fn wait_for_shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

async fn cluster(command: ClusterCommand) -> Result<ExitCode> {
    match command {
        ClusterCommand::Up {
            name,
            k8s_version,
            timeout,
            hold,
        } => {
            let mut opts = UpOptions::new(&name);
            opts.k8s_version = k8s_version;
            opts.timeout = std::time::Duration::from_secs(timeout);
            if hold {
                opts.reaper = Some(
                    std::env::current_exe()
                        .context("locating the unstuck binary for the reaper")?,
                );
            } else {
                opts.lifetime = Lifetime::Detached;
            }
            let cluster = LocalCluster::up(opts)
                .await
                .with_context(|| format!("bringing up local cluster '{name}'"))?;
            println!(
                "cluster '{name}' is up (Kubernetes {}, node Ready in {:.1}s)\n  export KUBECONFIG={}\n  logs: {}",
                cluster.k8s_version(),
                cluster.timings.node_ready.as_secs_f64(),
                cluster.kubeconfig().display(),
                cluster.layout().logs_dir().display()
            );
            if hold {
                eprintln!("holding the cluster; Ctrl-C tears it down");
                wait_for_shutdown_signal().await;
                let report = cluster.down().await;
                println!("cluster '{name}' is down: {report}");
            }
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Status { name } => {
            let all = local::list();
            let shown: Vec<_> = all
                .iter()
                .filter(|c| name.as_ref().is_none_or(|n| &c.name == n))
                .collect();
            if let Some(n) = &name
                && shown.is_empty()
            {
                anyhow::bail!("no local cluster named '{n}'; `unstuck cluster list` shows them");
            }
            for c in shown {
                println!(
                    "{} ({}){}",
                    c.name,
                    c.k8s_version.as_deref().unwrap_or("?"),
                    if c.stale { " STALE" } else { "" }
                );
                for (component, alive) in &c.components {
                    println!(
                        "  {component:<24} {}",
                        if *alive { "running" } else { "stopped" }
                    );
                }
                println!("  kubeconfig: {}", c.kubeconfig.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::List => {
            for c in local::list() {
                println!(
                    "{}\t{}\tslot {}\t{}",
                    c.name,
                    c.k8s_version.as_deref().unwrap_or("?"),
                    c.slot.map_or("?".into(), |s| s.to_string()),
                    if c.stale { "stale" } else { "up" }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Down { name } => {
            let report = local::down(&name).await?;
            println!("cluster '{name}' is down: {report}");
            Ok(if report.errors.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        ClusterCommand::Gc => {
            for (name, report) in local::sweep_stale().await? {
                println!("removed stale cluster '{name}': {report}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

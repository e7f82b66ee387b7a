//! The `unstuck` command line.

use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use unstuck::cluster::{
    kind::{self, KindCluster, KindOptions},
    local::{self, Lifetime, LocalCluster, UpOptions},
    provider::ProviderKind,
};

mod cmd;

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
    /// Manage throwaway clusters: local (real components as processes) or
    /// kind (from the offline node image).
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Run scenarios: bring up a throwaway local cluster (unless --kubeconfig),
    /// inject each failure, let the doctor recover it, prove recovery, report.
    Run(cmd::run::RunArgs),
    /// Diagnose objects stuck in Terminating on a live cluster and plan (or,
    /// with --apply, carry out) the remedy. Dry-run by default.
    Doctor(cmd::doctor::DoctorArgs),
    /// List the scenarios in a directory (and check that they load).
    Scenarios {
        #[arg(long, default_value = "scenarios")]
        dir: PathBuf,
        #[arg(long, default_value = "fixtures")]
        fixtures: PathBuf,
    },
    /// Start a scenario from what the doctor saw on a live cluster
    /// (`unstuck doctor --save-snapshot FILE`): the stuck objects and the
    /// blockers it proved become fixtures, the steps reproduce them and
    /// expect the same findings. Never writes over a file.
    NewScenario(cmd::new_scenario::NewScenarioArgs),
    /// Work with run reports.
    Report {
        #[command(subcommand)]
        command: cmd::report::ReportCommand,
    },
    /// Internal: the reaper that tears a cluster down when its harness dies.
    #[command(name = "__reap", hide = true)]
    Reap {
        /// The cluster is a kind cluster (DIR is its record).
        #[arg(long)]
        kind: bool,
        dir: PathBuf,
    },
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Bring a cluster up and leave it running.
    Up {
        #[arg(default_value = "unstuck")]
        name: String,
        /// Which provider makes it.
        #[arg(long, value_enum, env = "UNSTUCK_PROVIDER", default_value_t = ProviderKind::Local)]
        provider: ProviderKind,
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
    /// Show one cluster (or all) that unstuck made.
    Status { name: Option<String> },
    /// List the clusters unstuck made (local and kind).
    List,
    /// Stop a cluster and remove everything it made.
    Down {
        #[arg(default_value = "unstuck")]
        name: String,
        /// Which provider made it.
        #[arg(long, value_enum, env = "UNSTUCK_PROVIDER", default_value_t = ProviderKind::Local)]
        provider: ProviderKind,
    },
    /// Remove clusters (local and kind) whose harness died.
    Gc,
}

/// `pub` so that the kubectl plugin binary (`kubectl-unstuck`) can run
/// this same command line.
#[tokio::main]
pub async fn main() -> ExitCode {
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
            ExitCode::from(cmd::doctor::exit::ERROR)
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Reap { kind: false, dir } => {
            local::reap(&dir).await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Reap { kind: true, dir } => {
            kind::reap(&dir).await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cluster { command } => cluster(command).await,
        Command::Run(args) => cmd::run::run(args).await,
        Command::Report { command } => cmd::report::run(command),
        Command::NewScenario(args) => {
            cmd::new_scenario::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Doctor(args) => cmd::doctor::run(args).await,
        Command::Scenarios { dir, fixtures } => {
            let scenarios = cmd::load_scenarios(&dir, &fixtures)?;
            for s in &scenarios {
                let origin = match (s.catalog_case, s.incident.as_deref()) {
                    (_, Some(incident)) => incident.to_string(),
                    (Some(c), None) => format!("case {c}"),
                    (None, None) => "-".to_string(),
                };
                println!(
                    "{:<40} {:<28} {}",
                    s.name.as_str(),
                    origin,
                    s.description.as_str()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn cluster(command: ClusterCommand) -> Result<ExitCode> {
    match command {
        ClusterCommand::Up {
            name,
            provider: ProviderKind::Kind,
            k8s_version,
            timeout,
            hold,
        } => kind_up(name, k8s_version, timeout, hold).await,
        ClusterCommand::Up {
            name,
            provider: ProviderKind::Local,
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
                cmd::wait_for_shutdown_signal().await;
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
            let kinds: Vec<_> = kind::list()
                .into_iter()
                .filter(|c| name.as_ref().is_none_or(|n| &c.name == n))
                .collect();
            if let Some(n) = &name
                && shown.is_empty()
                && kinds.is_empty()
            {
                anyhow::bail!("no cluster named '{n}'; `unstuck cluster list` shows them");
            }
            for c in &kinds {
                println!(
                    "{} (kind, {}, node image {}){}",
                    c.name,
                    c.k8s_version,
                    c.image,
                    if c.stale { " STALE" } else { "" }
                );
                println!(
                    "  node: docker exec -it {} bash",
                    kind::node_container(&c.name)
                );
                println!("  kubeconfig: {}", c.kubeconfig.display());
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
                    "{}\tlocal\t{}\tslot {}\t{}",
                    c.name,
                    c.k8s_version.as_deref().unwrap_or("?"),
                    c.slot.map_or("?".into(), |s| s.to_string()),
                    if c.stale { "stale" } else { "up" }
                );
            }
            for c in kind::list() {
                println!(
                    "{}\tkind\t{}\t{}\t{}",
                    c.name,
                    c.k8s_version,
                    c.image,
                    if c.stale { "stale" } else { "up" }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Down {
            name,
            provider: ProviderKind::Kind,
        } => {
            let problems = kind::down(&name).await?;
            if problems.is_empty() {
                println!(
                    "kind cluster '{name}' is down: containers, volumes, network and record removed"
                );
                Ok(ExitCode::SUCCESS)
            } else {
                println!("kind cluster '{name}': {}", problems.join("; "));
                Ok(ExitCode::FAILURE)
            }
        }
        ClusterCommand::Down {
            name,
            provider: ProviderKind::Local,
        } => {
            let report = local::down(&name).await?;
            println!("cluster '{name}' is down: {report}");
            Ok(if report.errors.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        ClusterCommand::Gc => {
            unstuck::containers::gc().await;
            for (name, report) in local::sweep_stale().await? {
                println!("removed stale cluster '{name}': {report}");
            }
            for (name, problems) in kind::sweep_stale().await {
                println!(
                    "removed stale kind cluster '{name}'{}",
                    if problems.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", problems.join("; "))
                    }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `unstuck cluster up --provider kind`.
async fn kind_up(name: String, k8s_version: String, timeout: u64, hold: bool) -> Result<ExitCode> {
    let mut opts = KindOptions::new(&name, k8s_version);
    opts.timeout = std::time::Duration::from_secs(timeout.max(120));
    if hold {
        opts.reaper =
            Some(std::env::current_exe().context("locating the unstuck binary for the reaper")?);
    }
    let cluster = KindCluster::up(opts)
        .await
        .with_context(|| format!("bringing up kind cluster '{name}'"))?;
    println!(
        "kind cluster '{name}' is up (Kubernetes {}, node image {}, `kind create` {:.1}s, node Ready in {:.1}s)\n  export KUBECONFIG={}\n  node: docker exec -it {} bash",
        cluster.k8s_version(),
        cluster.image(),
        cluster.timings.create.as_secs_f64(),
        cluster.timings.node_ready.as_secs_f64(),
        cluster.kubeconfig().display(),
        cluster.node().container(),
    );
    if hold {
        eprintln!("holding the cluster; Ctrl-C deletes it");
        cmd::wait_for_shutdown_signal().await;
        let problems = cluster.down().await;
        println!(
            "kind cluster '{name}' is down{}",
            if problems.is_empty() {
                String::new()
            } else {
                format!(": {}", problems.join("; "))
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

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
    /// Internal: the reaper that tears a cluster down when its harness dies.
    #[command(name = "__reap", hide = true)]
    Reap { dir: PathBuf },
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
    }
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
                println!("holding the cluster; Ctrl-C tears it down");
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

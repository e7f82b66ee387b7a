//! The `unstuck` command line.

use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use unstuck::{
    cluster::provider::{
        AnyProvider, ClusterStatus, CreateOptions, Created, Lifetime, ProviderKind, Teardown,
    },
    cluster::providers::{all, provider},
    components::DEFAULT_K8S_VERSION,
};

mod cmd;

/// `unstuck --version`: the release, the commit it was built from and the
/// Kubernetes versions its clusters run.
fn long_version() -> &'static str {
    static TEXT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "{} (commit {})\nKubernetes: {} (default {}, newest {}; each built by ci/setup.sh --k8s-version V)",
            env!("CARGO_PKG_VERSION"),
            env!("UNSTUCK_COMMIT"),
            unstuck::components::SUPPORTED_K8S_VERSIONS.join(", "),
            DEFAULT_K8S_VERSION,
            unstuck::components::NEWEST_K8S_VERSION,
        )
    });
    TEXT.as_str()
}

#[derive(Parser)]
#[command(
    name = "unstuck",
    version,
    long_version = long_version(),
    about = "Inject, detect and recover Kubernetes objects stuck in Terminating"
)]
struct Cli {
    /// Colour on a terminal: auto (unless NO_COLOR is set), always, never.
    #[arg(long, global = true, value_enum, default_value_t = unstuck::style::ColorChoice::Auto)]
    color: unstuck::style::ColorChoice,
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
    /// Print a shell completion script: `source <(unstuck completion bash)`,
    /// or save it where your shell loads completions from.
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Internal: the reaper that tears a cluster down when its harness dies.
    #[command(name = "__reap", hide = true)]
    Reap {
        /// The provider that made the cluster.
        #[arg(long, value_enum)]
        provider: ProviderKind,
        /// The cluster's record.
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
    /// Remove clusters (local and kind) whose harness died, and the
    /// containers beside them; with --kubeconfig, instead, what killed
    /// `unstuck run --kubeconfig` runs left on that cluster (found by what
    /// each wrote down before it added anything).
    Gc {
        /// A cluster unstuck did not create, where runs were killed.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// The --kubeconfig context to use instead of its current one.
        #[arg(long, requires = "kubeconfig")]
        context: Option<String>,
    },
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
    let cli = Cli::parse();
    unstuck::style::init(cli.color);
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(cmd::doctor::exit::ERROR)
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Reap {
            provider: kind,
            dir,
        } => {
            let reaped = provider(kind, CreateOptions::owned(DEFAULT_K8S_VERSION, None))
                .reap(&dir)
                .await;
            Ok(match reaped {
                Some(t) if !t.problems.is_empty() => ExitCode::FAILURE,
                _ => ExitCode::SUCCESS,
            })
        }
        Command::Cluster { command } => cluster(command).await,
        Command::Run(args) => cmd::run::run(args).await,
        Command::Report { command } => cmd::report::run(command),
        Command::NewScenario(args) => {
            cmd::new_scenario::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Doctor(args) => cmd::doctor::run(args).await,
        Command::Completion { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "unstuck",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Scenarios { dir, fixtures } => {
            let scenarios = cmd::load_scenarios(&dir, "--dir", &fixtures)?;
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

/// `unstuck cluster ...`: every subcommand goes through the provider
/// interface, so a new provider needs nothing here.
async fn cluster(command: ClusterCommand) -> Result<ExitCode> {
    match command {
        ClusterCommand::Up {
            name,
            provider: kind,
            k8s_version,
            timeout,
            hold,
        } => {
            let reaper = if hold {
                Some(
                    std::env::current_exe()
                        .context("locating the unstuck binary for the reaper")?,
                )
            } else {
                None
            };
            let opts = CreateOptions {
                timeout: Some(std::time::Duration::from_secs(timeout)),
                lifetime: if hold {
                    Lifetime::Owned
                } else {
                    Lifetime::Detached
                },
                ..CreateOptions::owned(&k8s_version, reaper)
            };
            cluster_up(provider(kind, opts), &name, hold).await
        }
        ClusterCommand::Status { name } => {
            let shown: Vec<ClusterStatus> = all_clusters()
                .into_iter()
                .filter(|c| name.as_ref().is_none_or(|n| &c.name == n))
                .collect();
            if let Some(n) = &name
                && shown.is_empty()
            {
                anyhow::bail!("no cluster named '{n}'; `unstuck cluster list` shows them");
            }
            shown.iter().for_each(print_status);
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::List => {
            // Tab-separated for scripts (`cut -f1`), with kubectl's header.
            println!("NAME\tPROVIDER\tVERSION\tDETAIL\tSTATE");
            for c in all_clusters() {
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    c.name,
                    c.provider,
                    c.k8s_version.as_deref().unwrap_or("?"),
                    c.detail,
                    if c.stale { "stale" } else { "up" }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Down {
            name,
            provider: kind,
        } => {
            let teardown = provider(kind, CreateOptions::owned(DEFAULT_K8S_VERSION, None))
                .delete(&name)
                .await?;
            println!("{kind} cluster '{name}' is down: {teardown}");
            Ok(exit_of(&teardown))
        }
        ClusterCommand::Gc {
            kubeconfig: Some(kubeconfig),
            context,
        } => Ok(
            if cmd::gc_existing::gc(&kubeconfig, context.as_deref()).await? {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            },
        ),
        ClusterCommand::Gc {
            kubeconfig: None, ..
        } => {
            let mut failed = !unstuck::containers::gc().await;
            for p in all() {
                match p.sweep_stale().await {
                    Ok(swept) => {
                        for (name, teardown) in swept {
                            failed |= !teardown.problems.is_empty();
                            println!("removed stale {} cluster '{name}': {teardown}", p.kind());
                        }
                    }
                    Err(e) => {
                        failed = true;
                        eprintln!("error: sweeping stale {} clusters: {e}", p.kind());
                    }
                }
            }
            Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

/// One cluster as `cluster status` shows it.
fn print_status(c: &ClusterStatus) {
    println!(
        "{} ({}, {}, {}){}",
        c.name,
        c.provider,
        c.k8s_version.as_deref().unwrap_or("?"),
        c.detail,
        if c.stale { " STALE" } else { "" }
    );
    for (component, alive) in &c.components {
        println!(
            "  {component:<24} {}",
            if *alive { "running" } else { "stopped" }
        );
    }
    println!("  node: {}", c.node_access);
    println!("  kubeconfig: {}", c.kubeconfig.display());
}

/// The clusters of every provider, by provider and name.
fn all_clusters() -> Vec<ClusterStatus> {
    all().iter().flat_map(|p| p.list()).collect()
}

/// `unstuck cluster up`: creates the cluster and, with `hold`, keeps it
/// until Ctrl-C or SIGTERM, then deletes it.
async fn cluster_up(provider: AnyProvider, name: &str, hold: bool) -> Result<ExitCode> {
    let kind = provider.kind();
    // What the boot waits for, while it waits (a line every few seconds
    // in a CI log); off again before the cluster's lines are printed.
    unstuck::waiting::enable();
    let created = unstuck::cluster::provider::create_unless(
        provider.as_ref(),
        name,
        cmd::wait_for_shutdown_signal(),
    )
    .await
    .with_context(|| format!("bringing up {kind} cluster '{name}'"))?;
    unstuck::waiting::disable();
    let cluster = match created {
        Created::Up(cluster) => cluster,
        Created::Stopped(teardown) => {
            eprintln!(
                "interrupted while {kind} cluster '{name}' was starting; deleted it: {teardown}"
            );
            return Ok(ExitCode::from(130));
        }
    };
    println!(
        "{kind} cluster '{name}' is up (Kubernetes {}, node Ready in {:.1}s)\n  export KUBECONFIG={}",
        cluster.k8s_version(),
        cluster.node_ready().as_secs_f64(),
        cluster.kubeconfig().display(),
    );
    for line in cluster.describe() {
        println!("  {line}");
    }
    if !hold {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("holding the cluster; Ctrl-C deletes it");
    cmd::wait_for_shutdown_signal().await;
    let teardown = cluster.delete().await;
    println!("{kind} cluster '{name}' is down: {teardown}");
    Ok(exit_of(&teardown))
}

/// Success when a delete left nothing and nothing failed.
fn exit_of(teardown: &Teardown) -> ExitCode {
    if teardown.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

//! The subcommands that have outgrown main.rs.

pub mod doctor;
pub mod gc_existing;
pub mod new_scenario;
pub mod report;
pub mod run;
pub mod save_snapshot;

use anyhow::Result;

/// Context `context` of the kubeconfig at `path` (its current one when
/// `None`), a client on it, which cluster it is and whether unstuck made
/// it: how `run --kubeconfig` and `cluster gc --kubeconfig` meet a
/// cluster unstuck may not have created.
pub async fn connect_kubeconfig(
    path: &std::path::Path,
    context: Option<&str>,
) -> Result<(
    kube::Client,
    unstuck::cluster::identity::ClusterIdentity,
    bool,
)> {
    use unstuck::cluster::identity;
    let (context, server) = identity::kubeconfig_context_named(path, context)?;
    let client = unstuck::cluster::client::client_for_context(path, Some(&context)).await?;
    let (target, marked) = identity::identify(&client, context, server).await?;
    Ok((client, target, marked))
}

/// Loads every scenario in `dir` and checks that their fixtures exist.
/// `dir_flag` is the command's flag for `dir` (`--dir`, `--scenarios`),
/// named in the error when the directory is not there.
pub fn load_scenarios(
    dir: &std::path::Path,
    dir_flag: &str,
    fixtures: &std::path::Path,
) -> Result<Vec<unstuck::core::scenario::Scenario>> {
    if !dir.is_dir() {
        // Outside a checkout, "scenarios" is a relative path to nowhere.
        anyhow::bail!(
            "no scenario directory at {} (from {}): run from a checkout of unstuck, or name one with {dir_flag} (and its fixtures with --fixtures)",
            dir.display(),
            std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|_| "an unknown directory".into())
        );
    }
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

/// Prints a version matrix and the files it was written to; exit 0 only
/// if no scenario failed on any version.
pub fn show_matrix(
    matrix: &unstuck::report::matrix::MatrixReport,
    files: &[std::path::PathBuf],
) -> std::process::ExitCode {
    print!("{}", matrix.terminal());
    for f in files {
        eprintln!("[unstuck] wrote {}", f.display());
    }
    if matrix.all_passed() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

/// Ctrl-C or SIGTERM.
pub async fn wait_for_shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

//! `unstuck run --kubeconfig`: a cluster unstuck did not create. Which
//! one it is and whether it may be changed, which scenarios may run there
//! (no node faults; cluster-wide registrations only by name), and the
//! suite on it with every scenario's additions written down first.

use std::path::PathBuf;

use anyhow::Result;

use super::RunArgs;

/// On a cluster unstuck did not create, a scenario that registers
/// something cluster-wide runs only when `--allow-cluster-wide` names it;
/// a name there that is no scenario of this run is refused too (a typo
/// would otherwise allow nothing, silently).
pub(super) fn refuse_cluster_wide(
    args: &RunArgs,
    scenarios: &[unstuck::core::scenario::Scenario],
) -> Result<()> {
    use unstuck::runner::reach::cluster_wide;
    let unknown: Vec<&str> = args
        .allow_cluster_wide
        .iter()
        .filter(|n| !scenarios.iter().any(|s| s.name.as_str() == n.as_str()))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        anyhow::bail!(
            "--allow-cluster-wide names no scenario of this run: {}\n  `unstuck scenarios` lists them",
            unknown.join(", ")
        );
    }
    let refused: Vec<(&str, Vec<String>)> = scenarios
        .iter()
        .filter(|s| !args.allow_cluster_wide.iter().any(|n| n == s.name.as_str()))
        .map(|s| (s.name.as_str(), cluster_wide(s, &args.fixtures)))
        .filter(|(_, adds)| !adds.is_empty())
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = refused
        .iter()
        .map(|(name, adds)| format!("  {name}: adds {}", adds.join(", ")))
        .collect();
    let names: Vec<&str> = refused.iter().map(|(n, _)| *n).collect();
    anyhow::bail!(
        "these scenarios register something every request or discovery on this cluster goes through, for as long as they run (a dead APIService blocks every namespace deletion; a failing webhook rejects everyone's writes it matches):\n{}\n  \
         Run them here only if that is acceptable: --allow-cluster-wide={}\n  \
         (or leave them out with --filter). What they add is written down before it is added; after a killed run, `unstuck cluster gc --kubeconfig ...` removes it.",
        lines.join("\n"),
        names.join(",")
    );
}

/// The suite on a cluster unstuck did not make (`--kubeconfig`), which
/// the caller has checked may be changed.
pub(super) async fn existing_suite(
    args: &RunArgs,
    client: kube::Client,
    target: &unstuck::cluster::identity::ClusterIdentity,
    scenarios: Vec<unstuck::core::scenario::Scenario>,
    out_dir: &std::path::Path,
    fixtures: PathBuf,
    cancel_rx: tokio::sync::watch::Receiver<bool>,
) -> unstuck::report::RunReport {
    use unstuck::runner::suite::{SuiteOptions, run_suite};
    eprintln!("[unstuck] running on {target}");
    let journal = unstuck::runner::journal::JournalTarget {
        dir: unstuck::runner::journal::journal_dir(),
        cluster: unstuck::runner::journal::ClusterRef {
            kube_system_uid: target.kube_system_uid.clone(),
            server: target.server.clone(),
            context: target.context.clone(),
        },
    };
    // What killed runs left here first: their cluster-wide blockers would
    // break this run's scenarios too.
    super::super::gc_existing::report(
        &unstuck::runner::journal::sweep(&client, &journal.dir, &target.kube_system_uid).await,
        target,
    );
    let version = client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .unwrap_or_else(|e| format!("unknown (asking failed: {e})"));
    let opts = SuiteOptions {
        client,
        fixtures_dir: fixtures,
        out_dir: out_dir.to_path_buf(),
        node: None,
        parallelism: args.parallel,
        // A cluster unstuck did not make: no clusters of its own
        // beside it; scenarios that must run alone take turns.
        own_clusters: None,
        cluster: format!("context '{}' ({})", target.context, target.server),
        k8s_version: version,
        provider: Default::default(),
        shard: args.shard.as_ref().map(|s| s.to_string()),
        // Not ours to watch: its components are whoever runs them.
        cluster_exits: Default::default(),
        journal: Some(journal),
    };
    run_suite(&opts, scenarios, cancel_rx).await
}

/// Connects to a --kubeconfig cluster, says which it is, and refuses it
/// unless unstuck made it or `allowed` names its context.
pub(super) async fn guard_existing(
    path: &std::path::Path,
    context: Option<&str>,
    allowed: Option<&str>,
) -> Result<(kube::Client, unstuck::cluster::identity::ClusterIdentity)> {
    use unstuck::cluster::identity;
    let unknown = |e: &dyn std::fmt::Display| {
        anyhow::anyhow!(
            "cannot tell which cluster {} names: {e}\n  \
             `unstuck run` changes a cluster unstuck did not create only with --allow-existing-cluster=<its context>",
            path.display()
        )
    };
    let (client, target, marked) = super::super::connect_kubeconfig(path, context)
        .await
        .map_err(|e| unknown(&e))?;
    eprintln!(
        "[unstuck] target: {target}{}",
        if marked {
            " (a cluster unstuck created)"
        } else {
            " (not created by unstuck)"
        }
    );
    identity::guard(&target, marked, allowed)?;
    Ok((client, target))
}

//! `unstuck cluster gc --kubeconfig K`: what killed runs left on a cluster
//! unstuck did not create, found by their journals
//! ([`unstuck::runner::journal`]) and removed the way a live run's
//! cleanup removes it. Also run at the start of `unstuck run --kubeconfig`.

use std::path::Path;

use anyhow::{Context as _, Result};
use unstuck::cluster::identity::ClusterIdentity;
use unstuck::runner::journal::{self, Swept};

/// Sweeps the cluster `kubeconfig` names; whether everything recorded is
/// gone.
pub async fn gc(kubeconfig: &Path, context: Option<&str>) -> Result<bool> {
    let (client, target, _) = super::connect_kubeconfig(kubeconfig, context)
        .await
        .with_context(|| format!("connecting to the cluster {} names", kubeconfig.display()))?;
    let swept = journal::sweep(&client, &journal::journal_dir(), &target.kube_system_uid).await;
    if swept.is_empty() {
        println!("nothing left by killed runs on {target}");
    }
    Ok(report(&swept, &target))
}

/// Says what was removed for each killed run, and what could not be;
/// whether everything is gone.
pub fn report(swept: &[Swept], target: &ClusterIdentity) -> bool {
    let mut clean = true;
    for s in swept {
        let r = &s.report;
        println!(
            "removed what killed run {} (scenario {}) left on {target}: {}",
            s.run,
            s.scenario,
            if r.deleted.is_empty() && r.forced.is_empty() {
                "nothing was still there".to_owned()
            } else {
                let mut parts = Vec::new();
                if !r.deleted.is_empty() {
                    parts.push(format!("deleted {}", r.deleted.join(", ")));
                }
                if !r.forced.is_empty() {
                    parts.push(format!(
                        "removed its own finalizer keys {}",
                        r.forced.join(", ")
                    ));
                }
                parts.join("; ")
            }
        );
        if !s.not_ours.is_empty() {
            println!(
                "  left alone (the name holds an object without the run's label): {}",
                s.not_ours.join(", ")
            );
        }
        if !s.unread.is_empty() {
            println!(
                "  not readable now, so neither taken nor known gone (its record is kept for the next gc): {}",
                s.unread.join(", ")
            );
        }
        if !s.clean() {
            clean = false;
            println!(
                "  NOT all gone (its record is kept for the next gc): {}",
                r.failed
                    .iter()
                    .chain(&r.leaked)
                    .chain(&s.unread)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
    }
    clean
}

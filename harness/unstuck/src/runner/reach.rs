//! What a scenario adds that reaches beyond its own namespaces.
//!
//! A scenario's namespaces and objects are the run's alone, but some
//! fixtures register something the whole cluster goes through: an
//! APIService (a dead one fails discovery, and with it every namespace
//! deletion in the cluster), an admission webhook or policy (Gatekeeper's
//! `check-ignore-label` fails every namespace CREATE and UPDATE while its
//! backend is away). On a throwaway cluster that is the point; on a
//! cluster unstuck did not create it touches everyone else's work, so
//! `unstuck run --kubeconfig` runs such a scenario only when the person
//! names it (`--allow-cluster-wide=NAME`).

use std::path::Path;

use unstuck_core::scenario::Scenario;

use super::objects::read_manifests;

/// Kinds every request or discovery in the cluster can go through.
const REACHING: [&str; 7] = [
    "APIService",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
];

/// What `scenario`'s fixtures register cluster-wide, one line each
/// (`APIService v1beta1.metrics.k8s.io (dead-metrics-apiservice/apiservice.yaml)`);
/// empty when it keeps to its namespaces. An unreadable fixture is left
/// to the apply step to report.
pub fn cluster_wide(scenario: &Scenario, fixtures_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for file in scenario.fixture_files() {
        let Ok(docs) = read_manifests(&fixtures_dir.join(file)) else {
            continue;
        };
        for d in docs {
            let kind = d["kind"].as_str().unwrap_or_default();
            if REACHING.contains(&kind) {
                out.push(format!(
                    "{kind} {} ({})",
                    d["metadata"]["name"].as_str().unwrap_or("?"),
                    file.display()
                ));
            }
        }
    }
    out
}

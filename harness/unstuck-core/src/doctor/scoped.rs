//! A snapshot cut down to what a diagnosis scoped to some namespaces
//! reads (`unstuck doctor -n NS --save-snapshot F`).
//!
//! The collector lists pods, events, workloads and RBAC cluster-wide even
//! for `-n NS`: a finalizer's owner usually runs in another namespace. A
//! snapshot handed to a vendor about one namespace should still hold
//! nothing of the rest of the cluster that the diagnosis did not use. So
//! it keeps, besides the cluster-scoped registrations that can block the
//! scope (APIServices, webhooks, conversion webhooks, nodes, volumes):
//! - the namespaces that matter: the scope, `kube-system` (the control
//!   plane's Leases and pods), the namespaces of the Services behind
//!   webhooks and APIServices (their backends' pods and workloads), and
//!   the namespaces of every ServiceAccount that RBAC lets update a
//!   Terminating object in scope (the owner candidates);
//! - of namespaced objects (pods, events, Leases, workloads, claims,
//!   Roles and RoleBindings), those in these namespaces;
//! - of ClusterRoleBindings, those that grant such an update (ClusterRoles
//!   name no identity and stay, so that aggregation still resolves).
//!
//! When a grant goes to every ServiceAccount of the cluster
//! (`system:serviceaccounts`, `system:authenticated`), any pod may be the
//! owner, and nothing namespaced is cut. The core test
//! `doctor_scoped_snapshot.rs` checks, over every recorded snapshot, that
//! the cut snapshot gives the same findings as the whole one.

use std::collections::BTreeSet;

use super::model::{ObjectRecord, Snapshot};
use super::owner::known_keys::known_key;
use super::owner::rbac::{Grantee, Request};
use super::owner::words::OwnerWords;

/// `snapshot` with only what a diagnosis scoped to `namespaces` reads.
pub fn scoped(snapshot: &Snapshot, namespaces: &[String]) -> Snapshot {
    let mut s = snapshot.clone();
    let in_scope = |ns: Option<&str>| ns.is_none_or(|n| namespaces.iter().any(|x| x == n));
    s.terminating.retain(|r| in_scope(r.namespace()));
    s.namespace_content.retain(|r| in_scope(r.namespace()));

    let mut keep: BTreeSet<String> = namespaces.iter().cloned().collect();
    keep.insert("kube-system".to_owned());
    keep.insert("kube-node-lease".to_owned());
    for l in s.webhook_services.iter().chain(&s.api_service_backends) {
        keep.insert(l.service.namespace.clone());
    }
    let (owners, bindings, everyone) = owner_candidates(&s, namespaces);
    keep.extend(owners);
    if let Some(rbac) = &mut s.rbac {
        rbac.cluster_role_bindings.retain(|b| {
            bindings.contains(&format!(
                "ClusterRoleBinding {}",
                b.metadata.name.as_deref().unwrap_or_default()
            ))
        });
    }
    if everyone {
        return s;
    }
    let kept = |ns: Option<&String>| ns.is_some_and(|n| keep.contains(n));
    // Elsewhere, what carries a word or domain of a key in scope: the
    // owner search reads Leases, pods, workloads and events by name too
    // (a fresh Lease `8d3f5d2a.example.com` keeps `example.com/x` alive).
    let names = KeyNames::of(&s, namespaces);
    macro_rules! cut {
        ($list:expr) => {
            $list.retain(|x| kept(x.metadata.namespace.as_ref()) || names.mention(x))
        };
    }
    s.namespaces.retain(|n| kept(n.metadata.name.as_ref()));
    cut!(s.pods);
    cut!(s.leases);
    cut!(s.deployments);
    cut!(s.stateful_sets);
    cut!(s.daemon_sets);
    cut!(s.replica_sets);
    cut!(s.jobs);
    cut!(s.cron_jobs);
    // Events about a cluster-scoped object (a node, a volume, a
    // namespace) live in `default`: kept by what they are about.
    s.events.retain(|e| {
        kept(e.metadata.namespace.as_ref())
            || kept(e.involved_object.namespace.as_ref())
            || e.involved_object
                .namespace
                .as_deref()
                .unwrap_or_default()
                .is_empty()
            || names.mention(e)
    });
    if let Some(claims) = &mut s.persistent_volume_claims {
        claims.retain(|x| kept(x.metadata.namespace.as_ref()));
    }
    if let Some(rbac) = &mut s.rbac {
        rbac.roles.retain(|x| kept(x.metadata.namespace.as_ref()));
        rbac.role_bindings
            .retain(|x| kept(x.metadata.namespace.as_ref()));
    }
    s
}

/// The domains and product words of every finalizer key in scope.
struct KeyNames(Vec<String>);

impl KeyNames {
    fn of(s: &Snapshot, namespaces: &[String]) -> Self {
        let mut keys: BTreeSet<&str> = s
            .terminating
            .iter()
            .flat_map(|r| r.finalizers().iter().map(String::as_str))
            .collect();
        for n in s.namespaces.iter().filter(|n| {
            n.metadata
                .name
                .as_ref()
                .is_some_and(|x| namespaces.contains(x))
        }) {
            keys.extend(n.metadata.finalizers.iter().flatten().map(String::as_str));
            keys.extend(
                n.spec
                    .iter()
                    .flat_map(|sp| sp.finalizers.iter().flatten())
                    .map(String::as_str),
            );
        }
        let mut out = BTreeSet::new();
        for k in keys {
            let t = OwnerWords::of(k, known_key(k));
            out.extend(t.domains);
            out.extend(t.words);
        }
        Self(out.into_iter().map(|w| w.to_ascii_lowercase()).collect())
    }

    /// Whether `obj`'s text carries any of them. Wider than the owner
    /// search's own matching, on purpose: keeping one object too many
    /// only keeps its verdict.
    fn mention(&self, obj: &impl serde::Serialize) -> bool {
        let text = serde_json::to_string(obj)
            .unwrap_or_default()
            .to_ascii_lowercase();
        self.0.iter().any(|w| text.contains(w.as_str()))
    }
}

/// The namespaces of ServiceAccounts RBAC lets update a Terminating object
/// in scope (or a Terminating namespace of the scope), the bindings that
/// grant it, and whether some grant goes to every ServiceAccount.
fn owner_candidates(s: &Snapshot, namespaces: &[String]) -> (Vec<String>, BTreeSet<String>, bool) {
    let Some(rbac) = &s.rbac else {
        return (Vec::new(), BTreeSet::new(), false);
    };
    let mut records: Vec<ObjectRecord> = s.terminating.clone();
    records.extend(
        s.namespaces
            .iter()
            .filter(|n| {
                n.metadata.deletion_timestamp.is_some()
                    && n.metadata
                        .name
                        .as_ref()
                        .is_some_and(|x| namespaces.contains(x))
            })
            .map(ObjectRecord::of_namespace),
    );
    let (mut owners, mut bindings, mut everyone) = (Vec::new(), BTreeSet::new(), false);
    for r in &records {
        let resources: &[&str] = if r.kind == "Namespace" {
            &["namespaces", "namespaces/finalize"]
        } else {
            &[r.resource.as_str()]
        };
        for resource in resources {
            let grants = rbac.grants(&Request {
                group: r.group(),
                resource,
                namespace: r.namespace(),
                name: r.name(),
            });
            for g in &grants.to_service_accounts {
                bindings.insert(g.binding.clone());
                match &g.grantee {
                    Grantee::ServiceAccount { namespace, .. } => owners.push(namespace.clone()),
                    Grantee::NamespaceServiceAccounts { namespace, .. } => {
                        owners.push(namespace.clone())
                    }
                    Grantee::AllServiceAccounts(_) => everyone = true,
                }
            }
            for o in &grants.to_outside {
                bindings.insert(o.binding.clone());
            }
            // Users and groups outside: their bindings are evidence too.
            for other in &grants.to_others {
                if let Some(b) = other
                    .rsplit_once(" (")
                    .map(|(_, b)| b.trim_end_matches(')'))
                {
                    bindings.insert(b.to_owned());
                }
            }
        }
    }
    (owners, bindings, everyone)
}

//! Who serves a finalizer key. "No live owner" is argued from evidence in
//! the snapshot, never assumed, and the evidence is reported either way.
//!
//! Heuristics, from most to least certain:
//! 1. Built-in keys are removed by kube-controller-manager, and only on the
//!    kinds its controllers watch:
//!    - `kubernetes.io/pvc-protection` (PersistentVolumeClaim),
//!    - `kubernetes.io/pv-protection` (PersistentVolume),
//!    - `service.kubernetes.io/load-balancer-cleanup` (Service),
//!    - `batch.kubernetes.io/job-tracking` (Pod),
//!    - `kubernetes.io/pv-controller` (PersistentVolume),
//!    - `resource.kubernetes.io/delete-protection` (ResourceClaim),
//!    - `networking.k8s.io/service-cidr-finalizer` (ServiceCIDR),
//!    - `foregroundDeletion` and `orphan` (any kind: the garbage collector).
//!
//!    `customresourcecleanup.apiextensions.k8s.io` (CustomResourceDefinition)
//!    is removed by kube-apiserver itself, which answered the snapshot:
//!    always `Alive`.
//!
//!    On its kinds such a key is `Alive` when kube-controller-manager is
//!    alive: a fresh `kube-system/kube-controller-manager` Lease, or else a
//!    Running and Ready `kube-controller-manager` pod in `kube-system` (a
//!    controller manager run without leader election holds no lease).
//!    Otherwise `Unknown`: the built-in controller is not argued dead just
//!    because its liveness is not visible. On another kind the key is
//!    `Dead`: no built-in controller ever removes it there.
//! 2. `kubernetes` in an object's `metadata.finalizers` is `Dead`: the
//!    namespace controller only handles the `kubernetes` token in a
//!    Namespace's `spec.finalizers`; nothing removes it from metadata.
//! 3. Any other key `domain/path`: `Alive` when a fresh Lease in any
//!    namespace is named `domain`, or ends with `.domain` or `-domain`
//!    (controller-runtime leader-election IDs look like `8d3f5d2a.example.com`),
//!    or its holderIdentity contains `domain`. The parent domains of
//!    `domain` (down to two labels, e.g. `kubesphere.io` for
//!    `finalizers.kubesphere.io`) are tried the same way: a wider net only
//!    makes `Alive` more likely, which is the safe direction. Otherwise
//!    `Dead`, with the leases that were checked as evidence.
//! 4. A key without `/` that is not built-in: `Dead` when it has no `.`
//!    (no domain to look for). A dotted key without `/` (e.g. Argo CD's
//!    `resources-finalizer.argocd.argoproj.io`) is treated as a domain and
//!    checked against leases like rule 3, because stripping a live
//!    controller's finalizer is the one mistake the doctor must not make.
//! 5. Keys of components whose leases do not follow rule 3
//!    (`external-provisioner.volume.kubernetes.io/*`, `external-attacher/*`,
//!    `snapshot.storage.kubernetes.io/*`): `Alive` when a fresh lease's
//!    name or holder mentions the component, else `Unknown`, never `Dead`.
//!
//! Protection (`kubernetes.io/pvc-protection` on a claim a scheduled pod
//! references, `kubernetes.io/pv-protection` on a `Bound` volume) is judged
//! separately by [`protection_in_use`]: those keys are normal and never
//! stripped, whatever their owner's state.

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use super::snapshot::{Snapshot, display_name};

/// kube-controller-manager's key on PersistentVolumeClaims.
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// kube-controller-manager's key on PersistentVolumes.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

/// Which built-in component removes a key.
#[derive(Clone, Copy)]
enum Server {
    /// A controller in kube-controller-manager (named for evidence).
    ControllerManager(&'static str),
    /// A controller inside kube-apiserver (named for evidence).
    ApiServer(&'static str),
}

/// Built-in keys, the kind each is served on (`None`: any kind), and who
/// removes it.
const BUILT_IN: [(&str, Option<&str>, Server); 10] = [
    (
        PVC_PROTECTION,
        Some("PersistentVolumeClaim"),
        Server::ControllerManager("pvc-protection controller"),
    ),
    (
        PV_PROTECTION,
        Some("PersistentVolume"),
        Server::ControllerManager("pv-protection controller"),
    ),
    (
        "kubernetes.io/pv-controller",
        Some("PersistentVolume"),
        Server::ControllerManager("persistent volume controller"),
    ),
    (
        "foregroundDeletion",
        None,
        Server::ControllerManager("garbage collector"),
    ),
    (
        "orphan",
        None,
        Server::ControllerManager("garbage collector"),
    ),
    (
        "service.kubernetes.io/load-balancer-cleanup",
        Some("Service"),
        Server::ControllerManager("service (load balancer) controller"),
    ),
    (
        "batch.kubernetes.io/job-tracking",
        Some("Pod"),
        Server::ControllerManager("job controller"),
    ),
    (
        "resource.kubernetes.io/delete-protection",
        Some("ResourceClaim"),
        Server::ControllerManager("resource claim controller"),
    ),
    (
        "networking.k8s.io/service-cidr-finalizer",
        Some("ServiceCIDR"),
        Server::ControllerManager("service-cidr controller"),
    ),
    (
        "customresourcecleanup.apiextensions.k8s.io",
        Some("CustomResourceDefinition"),
        Server::ApiServer("apiextensions finalizer controller"),
    ),
];

/// Keys of well-known components outside the control plane whose leader
/// leases do not follow the domain rule (CSI sidecars, the snapshot
/// controller): the key prefix, and the word their lease names or holders
/// carry. Without such a lease their verdict is `Unknown`, never `Dead`.
const EXTERNAL: [(&str, &str); 3] = [
    (
        "external-provisioner.volume.kubernetes.io/",
        "external-provisioner",
    ),
    ("external-attacher/", "external-attacher"),
    ("snapshot.storage.kubernetes.io/", "snapshot"),
];

/// Whether `finalizer` is one of kube-controller-manager's built-in keys.
pub fn is_built_in(finalizer: &str) -> bool {
    BUILT_IN.iter().any(|(k, _, _)| *k == finalizer)
}

/// Whether a finalizer's owner is alive, dead or not known, with the
/// evidence for the verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all_fields = "camelCase")]
pub enum OwnerVerdict {
    /// A controller that serves the key is alive: leave it alone.
    Alive {
        /// Why it is considered alive.
        evidence: Vec<String>,
    },
    /// Nothing serves the key: it is an orphan.
    Dead {
        /// Why it is considered dead.
        evidence: Vec<String>,
    },
    /// Neither could be argued.
    Unknown {
        /// What was checked.
        evidence: Vec<String>,
    },
}

impl OwnerVerdict {
    /// The evidence lines, whatever the verdict.
    pub fn evidence(&self) -> &[String] {
        match self {
            OwnerVerdict::Alive { evidence }
            | OwnerVerdict::Dead { evidence }
            | OwnerVerdict::Unknown { evidence } => evidence,
        }
    }

    /// `Alive`, `Dead` or `Unknown`.
    pub fn label(&self) -> &'static str {
        match self {
            OwnerVerdict::Alive { .. } => "Alive",
            OwnerVerdict::Dead { .. } => "Dead",
            OwnerVerdict::Unknown { .. } => "Unknown",
        }
    }

    /// Whether the verdict is `Dead`.
    pub fn is_dead(&self) -> bool {
        matches!(self, OwnerVerdict::Dead { .. })
    }

    /// Whether the verdict is `Alive`.
    pub fn is_alive(&self) -> bool {
        matches!(self, OwnerVerdict::Alive { .. })
    }
}

/// The verdict on one finalizer key of one object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalizerVerdict {
    /// The key.
    pub finalizer: String,
    /// The verdict on its owner.
    #[serde(flatten)]
    pub verdict: OwnerVerdict,
}

/// Argues whether `finalizer`, found in the `metadata.finalizers` of an
/// object of kind `object_kind`, has a live owner. See the module docs for
/// the rules.
pub fn finalizer_owner(finalizer: &str, object_kind: &str, snapshot: &Snapshot) -> OwnerVerdict {
    if let Some((_, kind, server)) = BUILT_IN.iter().find(|(k, _, _)| *k == finalizer) {
        let controller = match server {
            Server::ControllerManager(c) => format!("kube-controller-manager's {c}"),
            Server::ApiServer(c) => format!("kube-apiserver's {c}"),
        };
        if let Some(kind) = kind
            && *kind != object_kind
        {
            return OwnerVerdict::Dead {
                evidence: vec![format!(
                    "{finalizer} is a built-in key that {controller} only removes from {kind} objects; nothing removes it from a {object_kind}"
                )],
            };
        }
        if let Server::ApiServer(_) = server {
            return OwnerVerdict::Alive {
                evidence: vec![format!(
                    "{finalizer} is served by {controller}, which runs in every kube-apiserver (one answered this snapshot)"
                )],
            };
        }
        let (alive, mut evidence) = controller_manager_alive(snapshot);
        evidence.insert(0, format!("{finalizer} is served by {controller}"));
        if (finalizer == "foregroundDeletion" || finalizer == "orphan")
            && !snapshot.discovery_failures.is_empty()
        {
            evidence.push(format!(
                "the garbage collector needs complete discovery, and discovery fails for {}",
                failing_group_versions(snapshot)
            ));
        }
        return if alive {
            OwnerVerdict::Alive { evidence }
        } else {
            OwnerVerdict::Unknown { evidence }
        };
    }

    if finalizer == "kubernetes" {
        return OwnerVerdict::Dead {
            evidence: vec![
                "\"kubernetes\" in metadata.finalizers has no controller: the namespace controller only handles the \"kubernetes\" token in a Namespace's spec.finalizers".to_owned(),
            ],
        };
    }

    if let Some((_, word)) = EXTERNAL.iter().find(|(p, _)| finalizer.starts_with(p)) {
        return external_verdict(finalizer, word, snapshot);
    }

    let domain = match finalizer.split_once('/') {
        Some((domain, _)) => domain,
        None if finalizer.contains('.') => finalizer,
        None => {
            return OwnerVerdict::Dead {
                evidence: vec![format!(
                    "{finalizer:?} is not a built-in key and names no domain (no '/'), so no controller can be looked for"
                )],
            };
        }
    };
    lease_verdict(domain, snapshot)
}

/// Rule for well-known external components: a fresh lease whose name or
/// holder carries `word` means alive; otherwise unknown.
fn external_verdict(finalizer: &str, word: &str, snapshot: &Snapshot) -> OwnerVerdict {
    let found = snapshot.fresh_leases().find(|l| {
        let name = l.metadata.name.as_deref().unwrap_or_default();
        let holder = l
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            .unwrap_or_default();
        name.contains(word) || holder.contains(word)
    });
    match found {
        Some(lease) => OwnerVerdict::Alive {
            evidence: vec![format!(
                "{finalizer} belongs to the {word} component; fresh lease {} (renewed {})",
                display_name(&lease.metadata),
                renew_age(snapshot, lease)
            )],
        },
        None => OwnerVerdict::Unknown {
            evidence: vec![format!(
                "{finalizer} belongs to the {word} component (a CSI sidecar or the snapshot controller), whose leases need not name it; no fresh lease mentions {word} ({} leases checked); confirm the driver is gone before removing it",
                snapshot.leases.len()
            )],
        },
    }
}

/// Rule 3: look for a fresh lease naming `domain` or one of its parents.
fn lease_verdict(domain: &str, snapshot: &Snapshot) -> OwnerVerdict {
    let domains = candidate_domains(domain);
    for lease in snapshot.fresh_leases() {
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            .unwrap_or_default();
        for d in &domains {
            let by_name =
                name == d || name.ends_with(&format!(".{d}")) || name.ends_with(&format!("-{d}"));
            let by_holder = holder.contains(d.as_str());
            if by_name || by_holder {
                let how = if by_name {
                    format!("its name matches {d}")
                } else {
                    format!("its holderIdentity {holder:?} contains {d}")
                };
                return OwnerVerdict::Alive {
                    evidence: vec![format!(
                        "fresh lease {} ({how}; holder {holder:?}, renewed {})",
                        display_name(&lease.metadata),
                        renew_age(snapshot, lease)
                    )],
                };
            }
        }
    }
    let stale: Vec<String> = snapshot
        .leases
        .iter()
        .filter(|l| !snapshot.lease_is_fresh(l))
        .filter(|l| {
            let name = l.metadata.name.as_deref().unwrap_or_default();
            domains.iter().any(|d| {
                name == d || name.ends_with(&format!(".{d}")) || name.ends_with(&format!("-{d}"))
            })
        })
        .map(|l| {
            format!(
                "lease {} names {domain} but is stale (renewed {})",
                display_name(&l.metadata),
                renew_age(snapshot, l)
            )
        })
        .collect();
    let mut evidence = vec![format!(
        "no fresh lease names {}; {} leases checked",
        domains.join(" or "),
        snapshot.leases.len()
    )];
    evidence.extend(stale);
    OwnerVerdict::Dead { evidence }
}

/// `a.b.example.com` -> [`a.b.example.com`, `b.example.com`, `example.com`].
fn candidate_domains(domain: &str) -> Vec<String> {
    let labels: Vec<&str> = domain.split('.').collect();
    let min = if labels.len() >= 2 { 2 } else { 1 };
    (0..=labels.len() - min)
        .map(|i| labels[i..].join("."))
        .collect()
}

fn renew_age(snapshot: &Snapshot, lease: &k8s_openapi::api::coordination::v1::Lease) -> String {
    match lease.spec.as_ref().and_then(|s| s.renew_time.as_ref()) {
        Some(t) => format!("{} ago", fmt_secs(snapshot.age_of(t.0).as_secs())),
        None => "never".to_owned(),
    }
}

/// Whether kube-controller-manager is alive, with the evidence.
pub fn controller_manager_alive(snapshot: &Snapshot) -> (bool, Vec<String>) {
    let lease = snapshot.leases.iter().find(|l| {
        l.metadata.namespace.as_deref() == Some("kube-system")
            && l.metadata.name.as_deref() == Some("kube-controller-manager")
    });
    if let Some(lease) = lease {
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            .unwrap_or_default();
        if snapshot.lease_is_fresh(lease) {
            return (
                true,
                vec![format!(
                    "lease kube-system/kube-controller-manager is fresh (holder {holder:?}, renewed {})",
                    renew_age(snapshot, lease)
                )],
            );
        }
        let mut evidence = vec![format!(
            "lease kube-system/kube-controller-manager is stale (holder {holder:?}, renewed {})",
            renew_age(snapshot, lease)
        )];
        if let Some(pod) = ready_controller_manager_pod(snapshot) {
            evidence.push(format!(
                "pod kube-system/{} is Running and Ready",
                pod.metadata.name.as_deref().unwrap_or_default()
            ));
            return (true, evidence);
        }
        return (false, evidence);
    }
    if let Some(pod) = ready_controller_manager_pod(snapshot) {
        return (
            true,
            vec![format!(
                "no kube-system/kube-controller-manager lease, but pod kube-system/{} is Running and Ready",
                pod.metadata.name.as_deref().unwrap_or_default()
            )],
        );
    }
    (
        false,
        vec![format!(
            "no kube-system/kube-controller-manager lease and no Ready kube-controller-manager pod in the snapshot ({} leases, {} pods checked)",
            snapshot.leases.len(),
            snapshot.pods.len()
        )],
    )
}

fn ready_controller_manager_pod(snapshot: &Snapshot) -> Option<&Pod> {
    snapshot.pods.iter().find(|p| {
        let meta = &p.metadata;
        let named = meta.name.as_deref().unwrap_or_default();
        let labelled = meta
            .labels
            .as_ref()
            .and_then(|l| l.get("component"))
            .is_some_and(|c| c == "kube-controller-manager");
        meta.namespace.as_deref() == Some("kube-system")
            && meta.deletion_timestamp.is_none()
            && (labelled || named.starts_with("kube-controller-manager"))
            && pod_running_ready(p)
    })
}

fn pod_running_ready(pod: &Pod) -> bool {
    let Some(status) = &pod.status else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .as_ref()
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether a protection finalizer on this object is in normal use:
/// `kubernetes.io/pvc-protection` on a PersistentVolumeClaim that a
/// scheduled pod references (by `persistentVolumeClaim.claimName`, or as
/// the generic ephemeral volume `<pod>-<volume>`), or
/// `kubernetes.io/pv-protection` on a PersistentVolume that is `Bound`.
/// Returns who uses it, or `None`. Pods are counted whatever their phase
/// (the controller's own rule is narrower; wider is the safe direction).
pub fn protection_in_use(
    finalizer: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    snapshot: &Snapshot,
) -> Option<Vec<String>> {
    match (finalizer, kind) {
        (PVC_PROTECTION, "PersistentVolumeClaim") => {
            let users: Vec<String> = snapshot
                .pods
                .iter()
                .filter(|p| p.metadata.namespace.as_deref() == namespace)
                .filter(|p| pod_uses_claim(p, name))
                .map(|p| {
                    let phase = p
                        .status
                        .as_ref()
                        .and_then(|s| s.phase.as_deref())
                        .unwrap_or("<unknown>");
                    let node = p
                        .spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .unwrap_or_default();
                    let deleting = if p.metadata.deletion_timestamp.is_some() {
                        ", itself terminating"
                    } else {
                        ""
                    };
                    format!(
                        "pod {} (phase {phase}, node {node}{deleting})",
                        display_name(&p.metadata)
                    )
                })
                .collect();
            (!users.is_empty()).then_some(users)
        }
        (PV_PROTECTION, "PersistentVolume") => {
            let pv = snapshot
                .persistent_volumes
                .iter()
                .find(|pv| pv.metadata.name.as_deref() == Some(name))?;
            let status = pv.status.as_ref()?;
            if status.phase.as_deref() != Some("Bound") {
                return None;
            }
            let claim = pv
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .map(|c| {
                    format!(
                        "claim {}/{}",
                        c.namespace.as_deref().unwrap_or_default(),
                        c.name.as_deref().unwrap_or_default()
                    )
                })
                .unwrap_or_else(|| "a claim".to_owned());
            Some(vec![format!("volume is Bound to {claim}")])
        }
        _ => None,
    }
}

fn pod_uses_claim(pod: &Pod, claim: &str) -> bool {
    let Some(spec) = &pod.spec else {
        return false;
    };
    if spec.node_name.as_deref().unwrap_or_default().is_empty() {
        return false;
    }
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    spec.volumes.iter().flatten().any(|v| {
        v.persistent_volume_claim
            .as_ref()
            .is_some_and(|c| c.claim_name == claim)
            || (v.ephemeral.is_some() && format!("{pod_name}-{}", v.name) == claim)
    })
}

/// `metrics.k8s.io/v1beta1, ...` from the snapshot's discovery failures.
pub(crate) fn failing_group_versions(snapshot: &Snapshot) -> String {
    let mut gvs: Vec<&str> = snapshot
        .discovery_failures
        .iter()
        .map(|d| d.group_version.as_str())
        .collect();
    gvs.sort_unstable();
    gvs.dedup();
    gvs.join(", ")
}

/// Seconds as `1h2m3s` / `2m5s` / `42s` (negative values keep their sign).
pub fn fmt_secs(secs: i64) -> String {
    let sign = if secs < 0 { "-" } else { "" };
    let s = secs.unsigned_abs();
    let (h, m, s) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{sign}{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{sign}{m}m{s}s")
    } else {
        format!("{sign}{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_domains() {
        assert_eq!(
            candidate_domains("finalizers.kubesphere.io"),
            vec!["finalizers.kubesphere.io", "kubesphere.io"]
        );
        assert_eq!(candidate_domains("example.com"), vec!["example.com"]);
        assert_eq!(candidate_domains("localhost"), vec!["localhost"]);
    }

    #[test]
    fn seconds() {
        assert_eq!(fmt_secs(42), "42s");
        assert_eq!(fmt_secs(125), "2m5s");
        assert_eq!(fmt_secs(3723), "1h2m3s");
        assert_eq!(fmt_secs(-5), "-5s");
    }
}

//! Keys served by the control plane itself, and by well-known components
//! whose leases do not follow the domain rule.
//!
//! Built-in keys are removed by kube-controller-manager, and only on the
//! kinds its controllers watch (`kubernetes.io/pvc-protection` on
//! PersistentVolumeClaims, ...; `foregroundDeletion` and `orphan` on any
//! kind: the garbage collector). `customresourcecleanup.apiextensions.k8s.io`
//! is removed by kube-apiserver itself, which answered the snapshot: always
//! `Alive`. On its kinds such a key is `Alive` when kube-controller-manager
//! is alive (a fresh `kube-system/kube-controller-manager` Lease, or a
//! Running and Ready `kube-controller-manager` pod: a controller manager
//! run without leader election holds no lease), else `Unknown`. On another
//! kind it is `Dead`: no built-in controller ever removes it there.
//! `service.kubernetes.io/load-balancer-cleanup` is the cloud controller
//! manager's, judged by [`super::cloud`].

use k8s_openapi::api::core::v1::Pod;

use super::leases::renew_age;
use super::{OwnerQuery, failing_group_versions};
use crate::doctor::model::{OwnerVerdict, Snapshot, display_name};
use crate::text::quoted;

/// kube-controller-manager's key on PersistentVolumeClaims.
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// kube-controller-manager's key on PersistentVolumes.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";
/// kube-controller-manager's key on VolumeAttributesClasses (GA in 1.34).
pub const VAC_PROTECTION: &str = "kubernetes.io/vac-protection";

/// Which built-in component removes a key.
#[derive(Clone, Copy)]
enum Remover {
    /// A controller in kube-controller-manager (named for evidence).
    ControllerManager(&'static str),
    /// A controller inside kube-apiserver (named for evidence).
    ApiServer(&'static str),
    /// A cloud controller manager's controller: outside kube-controller-
    /// manager since v1.31, judged by [`super::cloud`].
    CloudController,
}

/// Built-in keys, the kind each is served on (`None`: any kind), and who
/// removes it: every key Kubernetes' own components set in v1.33-v1.37,
/// from the source (v1.34.4 paths; the same constants in v1.33 and
/// v1.37 unless noted):
/// - `pkg/volume/util/finalizer.go`: pvc-, pv- and vac-protection;
/// - `component-helpers/storage/volume/pv_helpers.go`:
///   `kubernetes.io/pv-controller` (in-tree PV deletion protection);
/// - `apimachinery/pkg/apis/meta/v1/types.go`: `foregroundDeletion`,
///   `orphan` (garbage collector);
/// - `cloud-provider/controllers/service/controller.go`:
///   `service.kubernetes.io/load-balancer-cleanup`;
/// - `api/batch/v1/types.go`: `batch.kubernetes.io/job-tracking`;
/// - `pkg/apis/resource/types.go`: `resource.kubernetes.io/delete-protection`;
/// - `pkg/controller/servicecidrs/servicecidrs_controller.go`:
///   `networking.k8s.io/service-cidr-finalizer`;
/// - `apiextensions-apiserver/pkg/controller/finalizer/crd_finalizer.go`:
///   `customresourcecleanup.apiextensions.k8s.io`;
/// - v1.37 only, `pkg/apis/scheduling/types.go`:
///   `scheduling.k8s.io/podgroup-protection` (PodGroups, removed by
///   `pkg/controller/scheduling/podgroupprotection`).
///
/// `external-provisioner.volume.kubernetes.io/finalizer` (also in
/// pv_helpers.go) is set and removed by the CSI external-provisioner, not
/// by Kubernetes: see [`EXTERNAL`].
const BUILT_IN: [(&str, Option<&str>, Remover); 12] = [
    (
        PVC_PROTECTION,
        Some("PersistentVolumeClaim"),
        Remover::ControllerManager("pvc-protection controller"),
    ),
    (
        PV_PROTECTION,
        Some("PersistentVolume"),
        Remover::ControllerManager("pv-protection controller"),
    ),
    (
        VAC_PROTECTION,
        Some("VolumeAttributesClass"),
        Remover::ControllerManager("volumeattributesclass-protection controller"),
    ),
    (
        "kubernetes.io/pv-controller",
        Some("PersistentVolume"),
        Remover::ControllerManager("persistent volume controller"),
    ),
    (
        "foregroundDeletion",
        None,
        Remover::ControllerManager("garbage collector"),
    ),
    (
        "orphan",
        None,
        Remover::ControllerManager("garbage collector"),
    ),
    (
        "service.kubernetes.io/load-balancer-cleanup",
        Some("Service"),
        Remover::CloudController,
    ),
    (
        "batch.kubernetes.io/job-tracking",
        Some("Pod"),
        Remover::ControllerManager("job controller"),
    ),
    (
        "resource.kubernetes.io/delete-protection",
        Some("ResourceClaim"),
        Remover::ControllerManager("resource claim controller"),
    ),
    (
        "scheduling.k8s.io/podgroup-protection",
        Some("PodGroup"),
        Remover::ControllerManager("podgroup-protection controller"),
    ),
    (
        "networking.k8s.io/service-cidr-finalizer",
        Some("ServiceCIDR"),
        Remover::ControllerManager("service-cidr controller"),
    ),
    (
        "customresourcecleanup.apiextensions.k8s.io",
        Some("CustomResourceDefinition"),
        Remover::ApiServer("apiextensions finalizer controller"),
    ),
];

/// Keys of well-known components outside the control plane whose leader
/// leases do not follow the domain rule (CSI sidecars, the snapshot
/// controller): the key prefix, and the word their lease names or holders
/// carry. Without such a lease their verdict is `Unknown`, never `Dead`.
pub(super) const EXTERNAL: [(&str, &str); 3] = [
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

/// The verdict on a built-in key, or `None` when `finalizer` is not one.
pub(super) fn built_in_verdict(q: &OwnerQuery, snapshot: &Snapshot) -> Option<OwnerVerdict> {
    let (finalizer, object_kind) = (q.finalizer, q.kind);
    let (_, kind, server) = BUILT_IN.iter().find(|(k, _, _)| *k == finalizer)?;
    let controller = match server {
        Remover::ControllerManager(c) => format!("kube-controller-manager's {c}"),
        Remover::ApiServer(c) => format!("kube-apiserver's {c}"),
        Remover::CloudController => "a cloud controller manager's service controller".to_owned(),
    };
    if let Some(kind) = kind
        && *kind != object_kind
    {
        return Some(OwnerVerdict::Dead {
            evidence: vec![format!(
                "{finalizer} is a built-in key that {controller} only removes from {kind} objects; nothing removes it from a {object_kind}"
            )],
        });
    }
    if let Remover::CloudController = server {
        return Some(super::cloud::verdict(finalizer, q.record, snapshot));
    }
    if let Remover::ApiServer(_) = server {
        return Some(OwnerVerdict::Alive {
            evidence: vec![format!(
                "{finalizer} is served by {controller}, which runs in every kube-apiserver (one answered this snapshot)"
            )],
        });
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
    Some(if alive {
        OwnerVerdict::Alive { evidence }
    } else {
        OwnerVerdict::Unknown { evidence }
    })
}

/// Rule for well-known external components: a fresh lease whose name or
/// holder carries `word` means alive; otherwise unknown.
pub(super) fn external_verdict(finalizer: &str, word: &str, snapshot: &Snapshot) -> OwnerVerdict {
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
                    "lease kube-system/kube-controller-manager is fresh (holder {holder}, renewed {})",
                    renew_age(snapshot, lease),
                    holder = quoted(holder)
                )],
            );
        }
        let mut evidence = vec![format!(
            "lease kube-system/kube-controller-manager is stale (holder {holder}, renewed {})",
            renew_age(snapshot, lease),
            holder = quoted(holder)
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

pub(super) fn pod_running_ready(pod: &Pod) -> bool {
    let Some(status) = &pod.status else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .as_ref()
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

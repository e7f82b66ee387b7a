//! Protection keys in normal use: `kubernetes.io/pvc-protection` on a claim
//! a scheduled pod references, `kubernetes.io/pv-protection` on a `Bound`
//! volume, `kubernetes.io/vac-protection` on a VolumeAttributesClass a
//! claim or volume names. Those are never stripped, whatever their owner's
//! state.

use k8s_openapi::api::core::v1::Pod;

use super::builtin::{PV_PROTECTION, PVC_PROTECTION, VAC_PROTECTION};
use crate::doctor::model::{Snapshot, display_name};

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
        (VAC_PROTECTION, "VolumeAttributesClass") => vac_users(name, snapshot),
        _ => None,
    }
}

/// Who names VolumeAttributesClass `name`, as the vac-protection
/// controller asks (`isBeingUsed` in
/// `pkg/controller/volume/vacprotection/vac_protection_controller.go`,
/// v1.34.4): a PersistentVolume's `spec.volumeAttributesClassName`, or a
/// claim's `spec.volumeAttributesClassName`,
/// `status.currentVolumeAttributesClassName` or
/// `status.modifyVolumeStatus.targetVolumeAttributesClassName`.
fn vac_users(name: &str, snapshot: &Snapshot) -> Option<Vec<String>> {
    let Some(claims) = &snapshot.persistent_volume_claims else {
        return Some(vec![
            "PersistentVolumeClaims were not read, so whether a claim names it is not known"
                .to_owned(),
        ]);
    };
    let mut users = Vec::new();
    for c in claims {
        let spec = c
            .spec
            .as_ref()
            .and_then(|s| s.volume_attributes_class_name.as_deref());
        let status = c.status.as_ref();
        let current = status.and_then(|s| s.current_volume_attributes_class_name.as_deref());
        let target = status
            .and_then(|s| s.modify_volume_status.as_ref())
            .and_then(|m| m.target_volume_attributes_class_name.as_deref());
        for (field, value) in [
            ("spec.volumeAttributesClassName", spec),
            ("status.currentVolumeAttributesClassName", current),
            (
                "status.modifyVolumeStatus.targetVolumeAttributesClassName",
                target,
            ),
        ] {
            if value == Some(name) {
                users.push(format!(
                    "claim {} names it in {field}",
                    display_name(&c.metadata)
                ));
            }
        }
    }
    for pv in &snapshot.persistent_volumes {
        if pv
            .spec
            .as_ref()
            .and_then(|s| s.volume_attributes_class_name.as_deref())
            == Some(name)
        {
            users.push(format!(
                "volume {} names it in spec.volumeAttributesClassName",
                display_name(&pv.metadata)
            ));
        }
    }
    (!users.is_empty()).then_some(users)
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

//! LoadBalancerCleanupPending: a Service being deleted that holds
//! `service.kubernetes.io/load-balancer-cleanup`. Its key is judged here,
//! not with the object's other keys ([`super::objects`] skips it): its
//! owner is the cloud controller manager ([`crate::doctor::owner::cloud`]),
//! and what a removal costs (a load balancer left in the cloud) belongs in
//! the finding, with the addresses and the cloud's own error.

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::jiff::SignedDuration;

use super::{Diagnosis, record_ref};
use crate::doctor::model::{
    CloudFailure, FinalizerRemoval, Finding, FindingDetail, LOAD_BALANCER_CLEANUP,
    LoadBalancerCleanup, ObjectRecord, OwnerVerdict, display_name,
};
use crate::doctor::owner::{OwnerQuery, cloud::reports_since_deletion, fmt_secs};

impl Diagnosis<'_> {
    pub(super) fn load_balancer_cleanup(
        &self,
        record: &ObjectRecord,
        age: SignedDuration,
        findings: &mut Vec<Finding>,
    ) {
        let verdict = self.owners.verdict(&OwnerQuery {
            finalizer: LOAD_BALANCER_CLEANUP,
            kind: &record.kind,
            record: Some(record),
            assume_dead: self.assume_dead,
        });
        let finalizers = record.finalizers().to_vec();
        let dead = verdict.verdict.is_dead();
        let ingress = self.ingress_of(record);
        let failure = self.newest_failure(record);
        let what = format!("Service {}", display_name(&record.metadata));
        let held = format!(
            "{what} has been terminating for {} held by {LOAD_BALANCER_CLEANUP}",
            fmt_secs(age.as_secs())
        );
        let lb = LoadBalancerCleanup {
            removal: FinalizerRemoval {
                resource: record.resource.clone(),
                resource_version: record.metadata.resource_version.clone(),
                age_seconds: age.as_secs(),
                orphan: if dead {
                    vec![LOAD_BALANCER_CLEANUP.to_owned()]
                } else {
                    Vec::new()
                },
                kept: finalizers
                    .iter()
                    .filter(|k| !dead || *k != LOAD_BALANCER_CLEANUP)
                    .cloned()
                    .collect(),
                finalizers: finalizers.clone(),
                verdicts: vec![verdict.clone()],
            },
            ingress,
            failure,
        };
        let assumed = if verdict.assumed_dead {
            " (assumed: --assume-dead)"
        } else {
            ""
        };
        let summary = match (&verdict.verdict, &lb.failure) {
            (OwnerVerdict::Alive { .. }, Some(failure)) => format!(
                "{held}: the cloud controller manager fails to delete its load balancer ({}): {}",
                failure.reason, failure.message
            ),
            (OwnerVerdict::Alive { .. }, None) => format!(
                "{held}: the cloud controller manager is deleting its load balancer ({})",
                lb.ingress_text()
            ),
            (OwnerVerdict::Dead { .. }, _) => format!(
                "{held}, and the cloud controller manager that removes it is gone{assumed}; its load balancer ({}) would be left in the cloud",
                lb.ingress_text()
            ),
            (OwnerVerdict::Unknown { .. }, _) => format!(
                "{held}, and no cloud controller manager is shown running or gone; its load balancer: {}",
                lb.ingress_text()
            ),
        };
        let mut evidence: Vec<String> = self.deletion_line(&record.metadata).into_iter().collect();
        evidence.push(format!("finalizers [{}]", finalizers.join(", ")));
        evidence.push(format!(
            "status.loadBalancer.ingress: {}",
            lb.ingress_text()
        ));
        if let Some(f) = &lb.failure {
            evidence.push(format!(
                "Warning {} from service-controller, {} time(s), last {} ago: {}",
                f.reason,
                f.count,
                fmt_secs(f.last_seen_secs),
                f.message
            ));
        }
        evidence.push(format!(
            "{LOAD_BALANCER_CLEANUP}: owner {}{assumed}: {}",
            verdict.verdict.label(),
            verdict.verdict.evidence().join("; ")
        ));
        findings.push(Finding {
            subject: record_ref(record),
            summary,
            evidence,
            detail: FindingDetail::LoadBalancerCleanupPending(lb),
        });
    }

    /// The full Service's `status.loadBalancer.ingress`, when the
    /// collector read it (same UID: an earlier Service of the same name is
    /// another load balancer).
    fn ingress_of(&self, record: &ObjectRecord) -> Vec<String> {
        let service: Option<&Service> = self.snapshot.load_balancer_services.iter().find(|s| {
            s.metadata.namespace.as_deref() == record.namespace()
                && s.metadata.name.as_deref() == Some(record.name())
                && s.metadata.uid == record.metadata.uid
        });
        service
            .and_then(|s| s.status.as_ref())
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|i| i.hostname.clone().or_else(|| i.ip.clone()))
            .collect()
    }

    /// The newest Warning the service controller reported about the
    /// Service since its deletion began.
    fn newest_failure(&self, record: &ObjectRecord) -> Option<CloudFailure> {
        reports_since_deletion(self.snapshot, record)
            .into_iter()
            .find(|(e, _)| e.type_.as_deref() == Some("Warning"))
            .map(|(e, at)| CloudFailure {
                reason: e.reason.clone().unwrap_or_default(),
                message: e.message.clone().unwrap_or_default(),
                count: e
                    .series
                    .as_ref()
                    .and_then(|s| s.count)
                    .or(e.count)
                    .unwrap_or(1),
                last_seen_secs: self.snapshot.age_of(at).as_secs(),
            })
    }
}

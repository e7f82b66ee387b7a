//! The remedy for a [`FindingKind::DeadConversionWebhook`]: restoring the
//! webhook's backend is the gentle fix and is always said; switching the
//! CRD to conversion strategy `None` is planned only when it blocks
//! something and [`strategy_none_proof`] finds no schema difference, and
//! applied only for a CRD a person named with
//! `--allow-crd-conversion-changes=CRD` ([`Action::needs_conversion_consent`]):
//! what the webhook did can never be checked. Otherwise the doctor refuses
//! and names the command a person would run.
//!
//! [`FindingKind::DeadConversionWebhook`]: super::FindingKind::DeadConversionWebhook
//! [`Action::needs_conversion_consent`]: super::Action::needs_conversion_consent

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::super::backend::judge;
use super::super::conversion::{
    STRATEGY_WEBHOOK, conversion_service, stored_versions, strategy_none_proof,
};
use super::{Action, PlannedStep, refuse};
use crate::doctor::model::{ConversionWebhookFacts, Finding, Snapshot};

/// Force level of switching a CRD's conversion to `None`: like making a
/// webhook fail open, it changes how the API server treats every object of
/// the type, and is undone by re-applying the saved manifest.
pub const FORCE_CRD_CONVERSION_NONE: u8 = 2;

/// Set one CRD's `spec.conversion` to `{strategy: None}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetCrdConversionNone {
    /// The CRD's name.
    pub crd: String,
    /// Its UID (the patch tests it).
    pub uid: String,
    /// Its resourceVersion as read (the patch tests it): the schemas and
    /// storedVersions the proof was made on.
    pub resource_version: String,
    /// The Service its webhook called, for the report.
    pub service: String,
    /// What the schemas showed (no difference), and what they could not.
    pub proof: Vec<String>,
}

impl SetCrdConversionNone {
    /// `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/<name>`.
    pub fn api_path(&self) -> String {
        format!(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{}",
            self.crd
        )
    }

    /// The RFC 6902 patch: `test` the UID, the resourceVersion (so the
    /// schemas the proof read are still the CRD's) and that it still
    /// converts through a webhook, then `replace` the whole conversion: the
    /// API server refuses a webhook configuration beside strategy `None`.
    pub fn json_patch(&self) -> Value {
        json!([
            {"op": "test", "path": "/metadata/uid", "value": self.uid},
            {"op": "test", "path": "/metadata/resourceVersion", "value": self.resource_version},
            {"op": "test", "path": "/spec/conversion/strategy", "value": STRATEGY_WEBHOOK},
            {"op": "replace", "path": "/spec/conversion", "value": {"strategy": "None"}},
        ])
    }

    /// The dry-run lines of this step.
    pub(super) fn render(&self, out: &mut String) {
        let path = self.api_path();
        let _ = writeln!(
            out,
            "    GET {path} (save the manifest first; re-apply it to restore the webhook conversion once Service {} is back)",
            self.service
        );
        let _ = writeln!(
            out,
            "    PATCH {path} (application/json-patch+json) {}",
            self.json_patch()
        );
        let _ = writeln!(
            out,
            "    needs --allow-crd-conversion-changes={} besides --apply: the API server converts by rewriting apiVersion only until restored",
            self.crd
        );
    }
}

/// The command a person would run to do what the doctor refuses to.
pub fn manual_command(crd: &str) -> String {
    format!(
        "kubectl patch crd {crd} --type=merge -p '{{\"spec\":{{\"conversion\":{{\"strategy\":\"None\",\"webhook\":null}}}}}}'"
    )
}

/// The step for a DeadConversionWebhook finding, re-argued on the snapshot.
pub(super) fn strategy_none(
    i: usize,
    f: &Finding,
    facts: &ConversionWebhookFacts,
    snapshot: &Snapshot,
) -> PlannedStep {
    let ConversionWebhookFacts {
        crd: name,
        service,
        backend,
        blocks_namespaces,
        failed_lists,
        ..
    } = facts;
    let restore =
        format!("restoring Service {service} (the product's conversion webhook) is the gentle fix");
    let Some(crd) = snapshot.conversion_webhook_crds.iter().find(|c| {
        c.metadata.name.as_deref() == Some(name.as_str())
            && (f.subject.uid.is_none() || c.metadata.uid == f.subject.uid)
    }) else {
        return refuse(
            i,
            format!("CRD {name} no longer converts through a webhook; nothing to change"),
        );
    };
    if conversion_service(crd).as_ref() != Some(service)
        || !judge(snapshot.service_lookup(service)).is_gone()
    {
        return refuse(
            i,
            format!(
                "the backend of CRD {name}'s conversion webhook (Service {service}) is not proven gone on re-check; nothing is changed"
            ),
        );
    }
    if blocks_namespaces.is_empty() && failed_lists.is_empty() {
        return refuse(
            i,
            format!(
                "CRD {name}'s conversion webhook (Service {service}, {backend}) blocks nothing yet (no namespace deletion and no list fails on it): {restore} rather than change the CRD"
            ),
        );
    }
    let proof = strategy_none_proof(crd);
    if !proof.no_schema_difference {
        return refuse(
            i,
            format!(
                "{restore}. Switching CRD {name} to conversion strategy None loses what the schemas show: {}. A person who accepts that objects stored in versions [{}] are then read in other versions with only apiVersion rewritten, and fields the other version's schema lacks dropped on read, would run: {}",
                proof.reason,
                stored_versions(crd).join(", "),
                manual_command(name)
            ),
        );
    }
    let (Some(uid), Some(rv)) = (
        crd.metadata.uid.clone(),
        crd.metadata.resource_version.clone(),
    ) else {
        return refuse(
            i,
            format!(
                "CRD {name} has no uid/resourceVersion in the snapshot; a patch could not be bound to what the proof read"
            ),
        );
    };
    let rationale = format!(
        "{restore}. Otherwise: CRD {name} converts through Service {service}, which is gone ({backend}){}; for strategy None (apiVersion rewritten only): {} (see finding #{}). Only for a CRD named with --allow-crd-conversion-changes={name}, once you know what the webhook did; the patch replaces only spec.conversion, after saving the manifest; re-apply it to restore the webhook",
        if blocks_namespaces.is_empty() {
            String::new()
        } else {
            format!(
                ", and blocks deletion of namespace(s) {}",
                blocks_namespaces.join(", ")
            )
        },
        proof.reason,
        i + 1
    );
    PlannedStep {
        finding_index: i,
        action: Action::SetCrdConversionNone(SetCrdConversionNone {
            crd: name.clone(),
            uid,
            resource_version: rv,
            service: service.to_string(),
            proof: proof.evidence,
        }),
        rationale,
        force_level: FORCE_CRD_CONVERSION_NONE,
    }
}

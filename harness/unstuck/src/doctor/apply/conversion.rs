//! Applying [`SetCrdConversionNone`]: the CRD's manifest saved first,
//! then one JSON patch bound to the read the lossless proof was made on.

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client};
use unstuck_core::doctor::SetCrdConversionNone;

use super::{AppliedStep, Recorder, StepOutcome, write_refused};
use crate::text::or_none;

/// Switches one CRD to conversion strategy `None`: read and back up the
/// CRD, then a JSON patch that tests its UID, resourceVersion (the schemas
/// the proof read) and current strategy.
pub(super) async fn set_none(
    client: &Client,
    c: &SetCrdConversionNone,
    backups: &Path,
) -> AppliedStep {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut rec = Recorder::new("SetCrdConversionNone", c.api_path());
    if rec
        .read_and_back_up(&api, &c.crd, "CustomResourceDefinition", None, backups)
        .await
        .is_none()
    {
        return rec.finish();
    }
    let Some(r) = rec.json_patch(&api, &c.crd, c.json_patch()).await else {
        return rec.finish();
    };
    let restore = rec.backup_text();
    rec.end(match r {
        Ok(after) => {
            let strategy = after.spec.conversion.map(|c| c.strategy);
            if strategy.as_deref() == Some("None") {
                StepOutcome::Done(format!(
                    "CRD {} now converts with strategy None (apiVersion rewritten only); manifest saved to {restore} (kubectl apply -f it to restore the webhook conversion once Service {} is back)",
                    c.crd, c.service
                ))
            } else {
                StepOutcome::Failed(format!(
                    "spec.conversion.strategy reads {} after the patch",
                    or_none(strategy.as_deref())
                ))
            }
        }
        Err(e) => write_refused(&e, true),
    })
}

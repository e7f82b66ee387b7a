//! Applying [`FinalizeNamespace`]: the Namespace's manifest saved first,
//! then a PUT of its finalize subresource at the resourceVersion read.

use std::path::Path;

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client, api::PostParams};
use unstuck_core::doctor::FinalizeNamespace;

use super::{AppliedStep, Recorder, StepOutcome, write_refused};
use crate::text::list;

/// Removes the planned entries from one Namespace's `spec.finalizers`.
pub(super) async fn finalize(
    client: &Client,
    f: &FinalizeNamespace,
    backups: &Path,
) -> AppliedStep {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut rec = Recorder::new("FinalizeNamespace", f.api_path());
    rec.read_path = format!("/api/v1/namespaces/{}", f.name);
    let Some(ns) = rec
        .read_and_back_up(&api, &f.name, "Namespace", None, backups)
        .await
    else {
        return rec.finish();
    };
    let body = match f.body(&ns) {
        Ok(b) => b,
        Err(e @ unstuck_core::doctor::FinalizeError::ResourceVersionChanged { .. }) => {
            return rec.end(StepOutcome::Moved(format!(
                "the object changed since it was read: {e}"
            )));
        }
        Err(e) => return rec.end(StepOutcome::Failed(e.to_string())),
    };
    let r = api
        .replace_subresource("finalize", &f.name, &PostParams::default(), &body)
        .await;
    rec.call("PUT", serde_json::to_value(&body.spec).ok(), &r);
    rec.end(match r {
        Ok(_) => StepOutcome::Done(format!("spec.finalizers now {}", list(&f.kept()))),
        Err(e) => write_refused(&e, false),
    })
}

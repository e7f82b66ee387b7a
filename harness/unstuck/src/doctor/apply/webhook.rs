//! Applying [`SetWebhookFailurePolicy`]: the webhook configuration's
//! manifest saved first, then one JSON patch to `failurePolicy: Ignore`.

use std::path::Path;

use kube::{Api, Client, api::DynamicObject};
use unstuck_core::doctor::SetWebhookFailurePolicy;

use super::{AppliedStep, Recorder, StepOutcome, write_refused};

/// Makes one webhook fail open until its backend is restored.
pub(super) async fn fail_open(
    client: &Client,
    w: &SetWebhookFailurePolicy,
    backups: &Path,
) -> AppliedStep {
    let kind = w.configuration.kind();
    let ar = crate::doctor::collect::api_resource(
        "admissionregistration.k8s.io/v1",
        kind,
        w.configuration.resource(),
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut rec = Recorder::new("SetWebhookFailurePolicy", w.api_path());
    if rec
        .read_and_back_up(&api, &w.configuration_name, kind, None, backups)
        .await
        .is_none()
    {
        return rec.finish();
    }
    let Some(r) = rec
        .json_patch(&api, &w.configuration_name, w.json_patch())
        .await
    else {
        return rec.finish();
    };
    let restore = rec.backup_text();
    rec.end(match r {
        Ok(after) => {
            let policy = after.data["webhooks"][w.index]["failurePolicy"].as_str();
            if policy == Some("Ignore") {
                StepOutcome::Done(format!(
                    "webhook {:?} now fails open (failurePolicy Ignore) until its backend is restored; manifest saved to {restore} (kubectl apply -f it to restore failurePolicy Fail)",
                    w.webhook
                ))
            } else {
                StepOutcome::Failed(format!(
                    "failurePolicy reads {policy:?} after the patch"
                ))
            }
        }
        Err(e) => write_refused(&e, true),
    })
}

//! Applying [`SetWebhookFailurePolicy`]: the webhook configuration's
//! manifest saved first, then one JSON patch to `failurePolicy: Ignore`
//! that also records, on the configuration itself, what was changed: a
//! person who finds a policy failing open months later reads which entry,
//! its original policy, when and why, and how to restore it.

use std::path::Path;

use kube::{Api, Client, api::DynamicObject};
use serde_json::{Value, json};
use unstuck_core::doctor::SetWebhookFailurePolicy;

use super::{AppliedStep, Recorder, StepOutcome, write_refused};
use crate::text::{or_none, quoted};

/// The annotation prefix on a configuration one of whose entries the
/// doctor failed open for good (its backend proven gone); the key ends
/// with the entry's index: `unstuck.dev/failed-open-0`.
pub const FAILED_OPEN: &str = "unstuck.dev/failed-open";

/// The step's patch with the annotation that records it: the entry, its
/// original policy (`Fail`), the time, the reason and how to restore it.
fn recorded_patch(
    w: &SetWebhookFailurePolicy,
    current: &DynamicObject,
    restore: &str,
    at: &str,
) -> Value {
    let key = format!("{FAILED_OPEN}-{}", w.index);
    let note = json!({
        "webhook": w.webhook,
        "originalPolicy": "Fail",
        "at": at,
        "reason": w.reason,
        "restore": restore,
    })
    .to_string();
    let mut patch = w.json_patch();
    let ops = patch.as_array_mut().expect("a JSON patch is an array");
    if current.metadata.annotations.is_some() {
        ops.push(json!({"op": "add", "path": format!("/metadata/annotations/{}", key.replace('~', "~0").replace('/', "~1")), "value": note}));
    } else {
        ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": {key: note}}));
    }
    patch
}

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
    let Some(current) = rec
        .read_and_back_up(&api, &w.configuration_name, kind, None, backups)
        .await
    else {
        return rec.finish();
    };
    let restore = rec.backup_text();
    let how = format!("kubectl apply -f {restore}");
    let at = k8s_openapi::jiff::Timestamp::now().to_string();
    let patch = recorded_patch(w, &current, &how, &at);
    let Some(r) = rec.json_patch(&api, &w.configuration_name, patch).await else {
        return rec.finish();
    };
    rec.end(match r {
        Ok(after) => {
            let policy = after.data["webhooks"][w.index]["failurePolicy"].as_str();
            if policy == Some("Ignore") {
                StepOutcome::Done(format!(
                    "webhook {} now fails open (failurePolicy Ignore) until its backend is restored, recorded on the configuration as annotation {FAILED_OPEN}-{}; manifest saved to {restore}: restore failurePolicy Fail with `{how}`",
                    quoted(&w.webhook), w.index
                ))
            } else {
                StepOutcome::Failed(format!(
                    "failurePolicy reads {} after the patch",
                    or_none(policy)
                ))
            }
        }
        Err(e) => write_refused(&e, true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use unstuck_core::doctor::WebhookConfigKind;

    fn step() -> SetWebhookFailurePolicy {
        SetWebhookFailurePolicy {
            configuration: WebhookConfigKind::Validating,
            configuration_name: "kyverno-resource-validating-webhook-cfg".into(),
            uid: "u1".into(),
            resource_version: Some("42".into()),
            index: 1,
            webhook: "validate.kyverno.svc-fail".into(),
            reason: "ServiceNotFound: Service kyverno/kyverno-svc".into(),
        }
    }

    fn config(annotations: Option<Value>) -> DynamicObject {
        let mut meta = json!({"name": "kyverno-resource-validating-webhook-cfg", "uid": "u1", "resourceVersion": "42"});
        if let Some(a) = annotations {
            meta["annotations"] = a;
        }
        serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [
                {"name": "validate.kyverno.svc-ignore", "failurePolicy": "Ignore"},
                {"name": "validate.kyverno.svc-fail", "failurePolicy": "Fail"}
            ]
        }))
        .unwrap()
    }

    fn applied(current: &DynamicObject) -> Value {
        let patch: json_patch::Patch = serde_json::from_value(recorded_patch(
            &step(),
            current,
            "kubectl apply -f /backups/x.json",
            "2026-12-07T05:00:00Z",
        ))
        .unwrap();
        let mut doc = serde_json::to_value(current).unwrap();
        json_patch::patch(&mut doc, &patch).expect("the patch applies");
        doc
    }

    #[test]
    fn the_fail_open_is_recorded_on_the_configuration_beside_other_annotations() {
        let doc = applied(&config(Some(json!({"keep.example.com/x": "y"}))));
        assert_eq!(doc["webhooks"][1]["failurePolicy"], "Ignore");
        assert_eq!(doc["webhooks"][0]["failurePolicy"], "Ignore");
        assert_eq!(doc["metadata"]["annotations"]["keep.example.com/x"], "y");
        let note: Value = serde_json::from_str(
            doc["metadata"]["annotations"]["unstuck.dev/failed-open-1"]
                .as_str()
                .expect("the note"),
        )
        .unwrap();
        assert_eq!(note["webhook"], "validate.kyverno.svc-fail");
        assert_eq!(note["originalPolicy"], "Fail");
        assert_eq!(note["at"], "2026-12-07T05:00:00Z");
        assert_eq!(note["restore"], "kubectl apply -f /backups/x.json");
        assert!(note["reason"].as_str().unwrap().contains("ServiceNotFound"));
    }

    #[test]
    fn a_configuration_without_annotations_gets_them() {
        let doc = applied(&config(None));
        assert!(doc["metadata"]["annotations"]["unstuck.dev/failed-open-1"].is_string());
    }
}

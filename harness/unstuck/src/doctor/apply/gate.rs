//! A gate opened for the doctor's own write, and closed again (issue 27).
//!
//! A fail-closed webhook whose backend is installed but does not serve
//! (no ready endpoint: its pods Pending or crash-looping) rejects the write
//! that would release a stuck object. Failing it open for good would switch
//! off a policy engine that is only down; so, with
//! `--allow-webhook-changes`, the doctor sets only that webhook entry to
//! `Ignore` (the configuration saved first, the entry's original policy,
//! the time and the reason in an annotation), makes its write, and sets
//! `Fail` back at once, whatever the write's outcome. The report says how
//! long it was open; a restore that fails is a failed step (exit 4) with
//! the command that restores it by hand.

use std::{path::Path, time::Instant};

use kube::{Api, Client, api::DynamicObject};
use serde_json::{Value, json};
use unstuck_core::doctor::WebhookConfigKind;

use super::{AppliedStep, Recorder, StepOutcome, write_refused};
use crate::text::quoted;

/// The annotation on a configuration while one of its entries is open
/// for the doctor's write: which entry, its original policy, when and why.
/// Found on a configuration, it says a doctor was stopped between opening
/// and closing (the restore is then a person's, as the report says).
pub const WEBHOOK_GATE: &str = "unstuck.dev/webhook-gate";

/// The annotation key as a JSON pointer segment (`/` is `~1`).
fn gate_pointer() -> String {
    format!(
        "/metadata/annotations/{}",
        WEBHOOK_GATE.replace('~', "~0").replace('/', "~1")
    )
}

/// Restore attempts: a controller that writes the configuration (a CA
/// injector) can move it between our read and our patch.
const RESTORE_ATTEMPTS: usize = 3;

/// One webhook entry opened for one write; [`WebhookGate::close`] sets it
/// back.
pub struct WebhookGate {
    kind: WebhookConfigKind,
    configuration: String,
    webhook: String,
    opened: Instant,
}

fn api(client: &Client, kind: WebhookConfigKind) -> Api<DynamicObject> {
    let ar = crate::doctor::collect::api_resource(
        "admissionregistration.k8s.io/v1",
        kind.kind(),
        kind.resource(),
    );
    Api::all_with(client.clone(), &ar)
}

fn path(kind: WebhookConfigKind, name: &str) -> String {
    format!(
        "/apis/admissionregistration.k8s.io/v1/{}/{name}",
        kind.resource()
    )
}

/// The entry called `webhook` in a configuration's `webhooks`.
fn entry_index(obj: &DynamicObject, webhook: &str) -> Option<usize> {
    obj.data["webhooks"]
        .as_array()?
        .iter()
        .position(|w| w["name"].as_str() == Some(webhook))
}

/// The JSON patch that opens entry `i` (tests that it is the named entry
/// and still `Fail`, so a concurrent change is refused, not overwritten).
fn open_patch(obj: &DynamicObject, i: usize, webhook: &str, note: &str) -> Value {
    let mut ops = vec![
        json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": webhook}),
        json!({"op": "test", "path": format!("/webhooks/{i}/failurePolicy"), "value": "Fail"}),
        json!({"op": "replace", "path": format!("/webhooks/{i}/failurePolicy"), "value": "Ignore"}),
    ];
    if obj.metadata.annotations.is_some() {
        ops.push(json!({"op": "add", "path": gate_pointer(), "value": note}));
    } else {
        ops.push(
            json!({"op": "add", "path": "/metadata/annotations", "value": {WEBHOOK_GATE: note}}),
        );
    }
    Value::Array(ops)
}

/// The JSON patch that closes entry `i` again.
fn close_patch(obj: &DynamicObject, i: usize, webhook: &str) -> Value {
    let mut ops = vec![
        json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": webhook}),
        json!({"op": "replace", "path": format!("/webhooks/{i}/failurePolicy"), "value": "Fail"}),
    ];
    if obj
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(WEBHOOK_GATE))
    {
        ops.push(json!({"op": "remove", "path": gate_pointer()}));
    }
    Value::Array(ops)
}

/// Opens webhook `webhook` of `configuration` for one write: saved
/// first, then one JSON patch. The step's record, and the gate when it
/// is open.
pub async fn open(
    client: &Client,
    kind: WebhookConfigKind,
    configuration: &str,
    webhook: &str,
    reason: &str,
    backups: &Path,
) -> (AppliedStep, Option<WebhookGate>) {
    let api = api(client, kind);
    let mut rec = Recorder::new("OpenWebhookGate", path(kind, configuration));
    let Some(obj) = rec
        .read_and_back_up(&api, configuration, kind.kind(), None, backups)
        .await
    else {
        return (rec.finish(), None);
    };
    let Some(i) = entry_index(&obj, webhook) else {
        return (
            rec.end(StepOutcome::Failed(format!(
                "{} {configuration} has no webhook {webhook} any more",
                kind.kind(),
                webhook = quoted(webhook)
            ))),
            None,
        );
    };
    let note = json!({
        "webhook": webhook,
        "failurePolicy": "Fail",
        "openedAt": k8s_openapi::jiff::Timestamp::now().to_string(),
        "reason": reason,
    })
    .to_string();
    let Some(r) = rec
        .json_patch(&api, configuration, open_patch(&obj, i, webhook, &note))
        .await
    else {
        return (rec.finish(), None);
    };
    match r {
        Ok(after) if after.data["webhooks"][i]["failurePolicy"] == "Ignore" => {
            let restore = rec.backup_text();
            (
                rec.end(StepOutcome::Done(format!(
                    "webhook {webhook} fails open (failurePolicy Ignore) for the doctor's write only ({reason}); saved to {restore}; it is set back to Fail right after",
                    webhook = quoted(webhook)
                ))),
                Some(WebhookGate {
                    kind,
                    configuration: configuration.to_owned(),
                    webhook: webhook.to_owned(),
                    opened: Instant::now(),
                }),
            )
        }
        Ok(after) => (
            rec.end(StepOutcome::Failed(format!(
                "failurePolicy reads {} after the patch",
                after.data["webhooks"][i]["failurePolicy"]
            ))),
            None,
        ),
        Err(e) => (rec.end(write_refused(&e, true)), None),
    }
}

impl WebhookGate {
    /// Sets the entry back to `Fail` and removes the annotation, reading
    /// again and retrying when the configuration moved. A restore that
    /// cannot be made is [`StepOutcome::Failed`], with the command that
    /// makes it by hand.
    pub async fn close(self, client: &Client) -> AppliedStep {
        let api = api(client, self.kind);
        let mut rec = Recorder::new("CloseWebhookGate", path(self.kind, &self.configuration));
        let mut last = String::new();
        for _ in 0..RESTORE_ATTEMPTS {
            let obj = match api.get(&self.configuration).await {
                Ok(o) => o,
                Err(e) => {
                    last = crate::kube_error::text(&e);
                    continue;
                }
            };
            let Some(i) = entry_index(&obj, &self.webhook) else {
                last = format!("the webhook {} is no longer in it", quoted(&self.webhook));
                break;
            };
            let Some(r) = rec
                .json_patch(
                    &api,
                    &self.configuration,
                    close_patch(&obj, i, &self.webhook),
                )
                .await
            else {
                break;
            };
            match r {
                Ok(after) if after.data["webhooks"][i]["failurePolicy"] == "Fail" => {
                    return rec.end(StepOutcome::Done(format!(
                        "webhook {} fails closed again (failurePolicy Fail): it was open for {:.1} s, for the doctor's write only",
                        quoted(&self.webhook),
                        self.opened.elapsed().as_secs_f64()
                    )));
                }
                Ok(after) => {
                    last = format!(
                        "failurePolicy reads {} after the patch",
                        after.data["webhooks"][i]["failurePolicy"]
                    )
                }
                Err(e) => last = crate::kube_error::text(&e),
            }
        }
        rec.end(StepOutcome::Failed(format!(
            "webhook {} could not be set back to failurePolicy Fail ({last}); it still fails open: restore it with kubectl get {} {} -o json, set webhooks[name={}].failurePolicy to Fail, and kubectl replace -f it",
            quoted(&self.webhook),
            self.kind.resource(),
            self.configuration,
            quoted(&self.webhook)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(annotations: Option<Value>) -> DynamicObject {
        let mut meta = json!({"name": "namespace-policy", "resourceVersion": "7"});
        if let Some(a) = annotations {
            meta["annotations"] = a;
        }
        serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [
                {"name": "other.example.com", "failurePolicy": "Ignore"},
                {"name": "validate.namespaces.policy.example.com", "failurePolicy": "Fail"}
            ]
        }))
        .unwrap()
    }

    fn patched(doc: &mut Value, patch: Value) -> Result<(), json_patch::PatchError> {
        let p: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(doc, &p)
    }

    #[test]
    fn only_the_named_entry_is_opened_and_the_note_is_kept_beside_other_annotations() {
        let obj = config(None);
        let i = entry_index(&obj, "validate.namespaces.policy.example.com").unwrap();
        assert_eq!(i, 1);
        let open = open_patch(&obj, i, "validate.namespaces.policy.example.com", "{}");
        let mut doc = serde_json::to_value(&obj).unwrap();
        patched(&mut doc, open).unwrap();
        assert_eq!(doc["webhooks"][1]["failurePolicy"], "Ignore");
        assert_eq!(doc["webhooks"][0]["failurePolicy"], "Ignore", "untouched");
        assert_eq!(doc["metadata"]["annotations"][WEBHOOK_GATE], "{}");

        // Closing restores Fail and removes only our annotation.
        let mut opened: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
        opened
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert("keep.example.com/x".into(), "y".into());
        let mut doc = serde_json::to_value(&opened).unwrap();
        let close = close_patch(&opened, i, "validate.namespaces.policy.example.com");
        patched(&mut doc, close).unwrap();
        assert_eq!(doc["webhooks"][1]["failurePolicy"], "Fail");
        assert_eq!(doc["metadata"]["annotations"]["keep.example.com/x"], "y");
        assert!(doc["metadata"]["annotations"].get(WEBHOOK_GATE).is_none());
    }

    #[test]
    fn an_entry_changed_since_the_read_refuses_the_patch() {
        let obj = config(Some(json!({"a": "b"})));
        let open = open_patch(&obj, 1, "validate.namespaces.policy.example.com", "{}");
        let mut moved = serde_json::to_value(&obj).unwrap();
        moved["webhooks"][1]["failurePolicy"] = json!("Ignore");
        assert!(
            patched(&mut moved, open).is_err(),
            "a test op must refuse an entry that is no longer Fail"
        );
    }
}

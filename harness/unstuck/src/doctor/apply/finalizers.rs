//! Applying [`RemoveFinalizers`]: the object's manifest saved first, then
//! one JSON patch that tests its UID, resourceVersion and finalizers.

use std::path::Path;

use kube::Client;
use unstuck_core::doctor::RemoveFinalizers;

use super::{AppliedStep, Recorder, StepOutcome, dynamic_api, is_not_found, write_refused};
use crate::text::list;

/// Removes the planned finalizers from one object.
pub(super) async fn remove(client: &Client, rf: &RemoveFinalizers, backups: &Path) -> AppliedStep {
    let t = &rf.target;
    let api = dynamic_api(client, t);
    let mut rec = Recorder::new("RemoveFinalizers", t.api_path());
    if rec
        .read_and_back_up(&api, &t.name, &t.kind, t.namespace.as_deref(), backups)
        .await
        .is_none()
    {
        return rec.finish();
    }
    let Some(r) = rec.json_patch(&api, &t.name, rf.json_patch()).await else {
        return rec.finish();
    };
    rec.end(match r {
        Ok(after) => {
            let left = after.metadata.finalizers.unwrap_or_default();
            if rf.remove.iter().any(|f| left.contains(f)) {
                StepOutcome::Failed(format!(
                    "finalizers still hold {} after the patch",
                    list(&left)
                ))
            } else {
                StepOutcome::Done(format!(
                    "removed {}; finalizers now {}",
                    list(&rf.remove),
                    list(&left)
                ))
            }
        }
        // The last finalizer gone lets the object go while we patch.
        Err(e) if is_not_found(&e) => StepOutcome::Done("object gone".into()),
        Err(e) => write_refused(&e, true),
    })
}

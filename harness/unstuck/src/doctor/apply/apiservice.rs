//! Applying [`DeleteApiService`]: the APIService's manifest saved first,
//! then a delete with UID and resourceVersion preconditions.

use std::path::Path;

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::{
    Api, Client,
    api::{DeleteParams, Preconditions},
};
use unstuck_core::doctor::DeleteApiService;

use super::{AppliedStep, Recorder, StepOutcome, write_refused};

/// Deletes one APIService whose backend is gone.
pub(super) async fn delete(client: &Client, d: &DeleteApiService, backups: &Path) -> AppliedStep {
    let api: Api<APIService> = Api::all(client.clone());
    let mut rec = Recorder::new("DeleteApiService", d.api_path());
    if rec
        .read_and_back_up(&api, &d.name, "APIService", None, backups)
        .await
        .is_none()
    {
        return rec.finish();
    }
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(d.uid.clone()),
            resource_version: Some(d.resource_version.clone()),
        }),
        ..DeleteParams::default()
    };
    let r = api.delete(&d.name, &dp).await;
    rec.call("DELETE", Some(d.delete_options()), &r);
    let restore = rec.backup_text();
    rec.end(match r {
        Ok(_) => StepOutcome::Done(format!(
            "deleted; manifest saved to {restore} (kubectl apply -f it to restore)"
        )),
        Err(e) => write_refused(&e, false),
    })
}

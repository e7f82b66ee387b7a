//! Apply: carry out a [`Plan`], one step at a time. Before any change the
//! object's full manifest is saved so a person can undo it; every change is
//! conditional (a JSON patch that `test`s the finalizers and UID, or a
//! delete with UID and resourceVersion preconditions), so a concurrent
//! update by a live controller is never overwritten; every call made is
//! recorded.

use std::path::{Path, PathBuf};

use k8s_openapi::{
    api::core::v1::Namespace, kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client,
    api::{
        ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
    },
};
use serde::Serialize;
use unstuck_core::doctor::{Action, ObjectTarget, PlannedStep};

/// One API call the doctor made, as evidence.
#[derive(Clone, Debug, Serialize)]
pub struct ApiCall {
    pub method: &'static str,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
    /// `ok`, or the error the server returned.
    pub result: String,
}

/// What happened to one step.
#[derive(Clone, Debug, Serialize)]
pub struct AppliedStep {
    pub action: String,
    pub target: String,
    pub outcome: StepOutcome,
    pub calls: Vec<ApiCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<PathBuf>,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(tag = "status", content = "detail", rename_all = "camelCase")]
pub enum StepOutcome {
    /// The change was made and a re-read confirmed it.
    Done(String),
    /// Nothing to change (a wait, a refusal, or the object was already gone).
    Skipped(String),
    /// The server refused or the re-check failed; later steps still run,
    /// each conditional on what it saw.
    Failed(String),
}

fn dynamic_api(client: &Client, t: &ObjectTarget) -> Api<DynamicObject> {
    let (group, version) = match t.api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), t.api_version.clone()),
    };
    let ar = ApiResource {
        group,
        version,
        api_version: t.api_version.clone(),
        kind: t.kind.clone(),
        plural: t.resource.clone(),
    };
    match &t.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

fn backup_path(dir: &Path, kind: &str, ns: Option<&str>, name: &str) -> PathBuf {
    let stamp = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    let ns = ns.map(|n| format!("{n}.")).unwrap_or_default();
    dir.join(format!("{}.{ns}{name}.{stamp}.json", kind.to_lowercase()))
}

fn save_backup(
    dir: &Path,
    kind: &str,
    ns: Option<&str>,
    name: &str,
    manifest: &impl Serialize,
) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("creating backup dir {}: {e}", dir.display()))?;
    let path = backup_path(dir, kind, ns, name);
    let text = serde_json::to_string_pretty(manifest).map_err(|e| e.to_string())?;
    std::fs::write(&path, text).map_err(|e| format!("writing backup {}: {e}", path.display()))?;
    Ok(path)
}

fn result_text<T>(r: &Result<T, kube::Error>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => e.to_string(),
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Applies one step. Never panics on server errors: they become
/// [`StepOutcome::Failed`] with the server's words.
pub async fn apply_step(client: &Client, step: &PlannedStep, backups: &Path) -> AppliedStep {
    match &step.action {
        Action::Wait { reason } => skipped("Wait", "-", reason),
        Action::Refuse { reason } => skipped("Refuse", "-", reason),
        Action::RemoveFinalizers(rf) => {
            let t = &rf.target;
            let api = dynamic_api(client, t);
            let target = t.api_path();
            let mut calls = Vec::new();
            let current = api.get_opt(&t.name).await;
            calls.push(ApiCall {
                method: "GET",
                path: target.clone(),
                body: None,
                result: result_text(&current),
            });
            let obj = match current {
                Ok(Some(o)) => o,
                Ok(None) => {
                    return outcome(
                        "RemoveFinalizers",
                        &target,
                        StepOutcome::Skipped("already gone".into()),
                        calls,
                        None,
                    );
                }
                Err(e) => {
                    return outcome(
                        "RemoveFinalizers",
                        &target,
                        StepOutcome::Failed(e.to_string()),
                        calls,
                        None,
                    );
                }
            };
            let backup = match save_backup(backups, &t.kind, t.namespace.as_deref(), &t.name, &obj)
            {
                Ok(p) => p,
                // No backup, no change.
                Err(e) => {
                    return outcome(
                        "RemoveFinalizers",
                        &target,
                        StepOutcome::Failed(e),
                        calls,
                        None,
                    );
                }
            };
            let patch_value = rf.json_patch();
            let patch: json_patch::Patch = match serde_json::from_value(patch_value.clone()) {
                Ok(p) => p,
                Err(e) => {
                    return outcome(
                        "RemoveFinalizers",
                        &target,
                        StepOutcome::Failed(format!("bad patch: {e}")),
                        calls,
                        Some(backup),
                    );
                }
            };
            let r = api
                .patch(&t.name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await;
            calls.push(ApiCall {
                method: "PATCH",
                path: target.clone(),
                body: Some(patch_value),
                result: result_text(&r),
            });
            let o = match r {
                Ok(after) => {
                    let left = after.metadata.finalizers.unwrap_or_default();
                    if rf.remove.iter().any(|f| left.contains(f)) {
                        StepOutcome::Failed(format!(
                            "finalizers still hold {left:?} after the patch"
                        ))
                    } else {
                        StepOutcome::Done(format!(
                            "removed {:?}; finalizers now {left:?}",
                            rf.remove
                        ))
                    }
                }
                // The last finalizer gone lets the object go while we patch.
                Err(e) if is_not_found(&e) => StepOutcome::Done("object gone".into()),
                Err(e) => StepOutcome::Failed(e.to_string()),
            };
            outcome("RemoveFinalizers", &target, o, calls, Some(backup))
        }
        Action::DeleteApiService(d) => {
            let api: Api<APIService> = Api::all(client.clone());
            let target = d.api_path();
            let mut calls = Vec::new();
            let current = api.get_opt(&d.name).await;
            calls.push(ApiCall {
                method: "GET",
                path: target.clone(),
                body: None,
                result: result_text(&current),
            });
            let svc = match current {
                Ok(Some(s)) => s,
                Ok(None) => {
                    return outcome(
                        "DeleteApiService",
                        &target,
                        StepOutcome::Skipped("already gone".into()),
                        calls,
                        None,
                    );
                }
                Err(e) => {
                    return outcome(
                        "DeleteApiService",
                        &target,
                        StepOutcome::Failed(e.to_string()),
                        calls,
                        None,
                    );
                }
            };
            let backup = match save_backup(backups, "APIService", None, &d.name, &svc) {
                Ok(p) => p,
                Err(e) => {
                    return outcome(
                        "DeleteApiService",
                        &target,
                        StepOutcome::Failed(e),
                        calls,
                        None,
                    );
                }
            };
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(d.uid.clone()),
                    resource_version: Some(d.resource_version.clone()),
                }),
                ..DeleteParams::default()
            };
            let r = api.delete(&d.name, &dp).await;
            calls.push(ApiCall {
                method: "DELETE",
                path: target.clone(),
                body: Some(d.delete_options()),
                result: result_text(&r),
            });
            let o = match r {
                Ok(_) => StepOutcome::Done(format!(
                    "deleted; manifest saved to {} (kubectl apply -f it to restore)",
                    backup.display()
                )),
                Err(e) => StepOutcome::Failed(e.to_string()),
            };
            outcome("DeleteApiService", &target, o, calls, Some(backup))
        }
        Action::FinalizeNamespace(f) => {
            let api: Api<Namespace> = Api::all(client.clone());
            let target = f.api_path();
            let mut calls = Vec::new();
            let current = api.get_opt(&f.name).await;
            calls.push(ApiCall {
                method: "GET",
                path: format!("/api/v1/namespaces/{}", f.name),
                body: None,
                result: result_text(&current),
            });
            let ns = match current {
                Ok(Some(n)) => n,
                Ok(None) => {
                    return outcome(
                        "FinalizeNamespace",
                        &target,
                        StepOutcome::Skipped("already gone".into()),
                        calls,
                        None,
                    );
                }
                Err(e) => {
                    return outcome(
                        "FinalizeNamespace",
                        &target,
                        StepOutcome::Failed(e.to_string()),
                        calls,
                        None,
                    );
                }
            };
            let backup = match save_backup(backups, "Namespace", None, &f.name, &ns) {
                Ok(p) => p,
                Err(e) => {
                    return outcome(
                        "FinalizeNamespace",
                        &target,
                        StepOutcome::Failed(e),
                        calls,
                        None,
                    );
                }
            };
            let body = match f.body(&ns) {
                Ok(b) => b,
                Err(e) => {
                    return outcome(
                        "FinalizeNamespace",
                        &target,
                        StepOutcome::Failed(e.to_string()),
                        calls,
                        Some(backup),
                    );
                }
            };
            let r = api
                .replace_subresource("finalize", &f.name, &PostParams::default(), &body)
                .await;
            calls.push(ApiCall {
                method: "PUT",
                path: target.clone(),
                body: serde_json::to_value(&body.spec).ok(),
                result: result_text(&r),
            });
            let o = match r {
                Ok(_) => StepOutcome::Done(format!("spec.finalizers now {:?}", f.kept())),
                Err(e) => StepOutcome::Failed(e.to_string()),
            };
            outcome("FinalizeNamespace", &target, o, calls, Some(backup))
        }
    }
}

fn skipped(action: &str, target: &str, reason: &str) -> AppliedStep {
    outcome(
        action,
        target,
        StepOutcome::Skipped(reason.to_string()),
        Vec::new(),
        None,
    )
}

fn outcome(
    action: &str,
    target: &str,
    outcome: StepOutcome,
    calls: Vec<ApiCall>,
    backup: Option<PathBuf>,
) -> AppliedStep {
    AppliedStep {
        action: action.to_string(),
        target: target.to_string(),
        outcome,
        calls,
        backup,
    }
}

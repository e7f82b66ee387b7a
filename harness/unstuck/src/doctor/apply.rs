//! Apply: carry out a `Plan`, one step at a time. Before any change the
//! object's full manifest is saved so a person can undo it; every change is
//! conditional (a JSON patch that `test`s the UID, resourceVersion and
//! finalizers, a delete with UID and resourceVersion preconditions, a PUT
//! of the resourceVersion read), so a concurrent update by a live
//! controller is never overwritten; every call made is recorded.

use std::path::{Path, PathBuf};

use kube::{
    Api, Client,
    api::{DynamicObject, Patch, PatchParams},
};
use serde::Serialize;
use unstuck_core::doctor::{Action, ObjectTarget, PlannedStep};

mod apiservice;
mod conversion;
mod finalizers;
pub mod gate;
mod namespace;
mod webhook;

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
    /// A step that changes nothing by design: the cluster resolves it (a
    /// live controller, the namespace controller's next pass).
    Waiting(String),
    /// The doctor declined to act (an owner not proven dead, ...).
    Refused(String),
    /// Nothing written: the object was already gone, or a fresh read no
    /// longer holds the step.
    Skipped(String),
    /// The server refused the write because the object changed since it
    /// was read (a 409, or a JSON patch `test` that no longer holds): worth
    /// reading and arguing again.
    Moved(String),
    /// The server refused or the re-check failed; later steps still run,
    /// each conditional on what it saw.
    Failed(String),
    /// Not applied: no one confirmed it (a step a later round found that
    /// the plan shown did not hold), or a dead webhook rejects it and may
    /// not be changed. Says what was left and why.
    Left(String),
}

/// As the JSON report has it, status then detail: `done: removed [a]`.
impl std::fmt::Display for StepOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (status, detail) = match self {
            StepOutcome::Done(d) => ("done", d),
            StepOutcome::Waiting(d) => ("waiting", d),
            StepOutcome::Refused(d) => ("refused", d),
            StepOutcome::Skipped(d) => ("skipped", d),
            StepOutcome::Moved(d) => ("moved", d),
            StepOutcome::Failed(d) => ("failed", d),
            StepOutcome::Left(d) => ("left", d),
        };
        write!(f, "{status}: {detail}")
    }
}

impl StepOutcome {
    /// A write the server refused (moved or failed): the run did not do
    /// what it set out to.
    pub fn is_failure(&self) -> bool {
        matches!(self, StepOutcome::Failed(_) | StepOutcome::Moved(_))
    }
}

/// The outcome of a refused write. A conflict (a precondition or a
/// resourceVersion) says the object moved; so does a 422 for one of our
/// JSON patches, whose only way to fail to apply is a `test` op that no
/// longer holds (the server does not say which: "the server rejected our
/// request due to an error in our request").
fn write_refused(e: &kube::Error, json_patch: bool) -> StepOutcome {
    let moved = matches!(e, kube::Error::Api(s)
        if s.code == 409
            || (json_patch && s.code == 422 && s.message.contains("due to an error in our request")));
    if moved {
        StepOutcome::Moved(format!(
            "the object changed since it was read: the server refused the write ({})",
            crate::kube_error::text(e)
        ))
    } else {
        StepOutcome::Failed(crate::kube_error::text(e))
    }
}

fn dynamic_api(client: &Client, t: &ObjectTarget) -> Api<DynamicObject> {
    let ar = super::collect::api_resource(&t.api_version, &t.kind, &t.resource);
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

/// Why a manifest could not be saved before a change (the change is then
/// not made).
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("creating backup dir {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("making backup dir {} private: {source}", dir.display())]
    MakePrivate {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("serialising the manifest: {0}")]
    Serialise(#[from] serde_json::Error),
    #[error("writing backup {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn save_backup(
    dir: &Path,
    kind: &str,
    ns: Option<&str>,
    name: &str,
    manifest: &impl Serialize,
) -> Result<PathBuf, BackupError> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
    // Backups can hold Secrets: only their owner may read them. A directory
    // the user already had keeps its mode (it may be shared on purpose);
    // the files in it are 0600 whatever it is.
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| BackupError::CreateDir {
                dir: dir.to_owned(),
                source,
            })?;
        // The mode given at creation is masked by the umask; say it exactly.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| BackupError::MakePrivate {
                dir: dir.to_owned(),
                source,
            },
        )?;
    }
    let path = backup_path(dir, kind, ns, name);
    let text = serde_json::to_string_pretty(manifest)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|source| BackupError::Write {
            path: path.clone(),
            source,
        })?;
    Ok(path)
}

fn result_text<T>(r: &Result<T, kube::Error>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => crate::kube_error::text(e),
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Applies one step. Never panics on server errors: they become
/// [`StepOutcome::Failed`] with the server's words.
pub async fn apply_step(client: &Client, step: &PlannedStep, backups: &Path) -> AppliedStep {
    match &step.action {
        Action::Wait { reason } => observed("Wait", StepOutcome::Waiting(reason.clone())),
        Action::Refuse { reason, .. } => observed("Refuse", StepOutcome::Refused(reason.clone())),
        Action::RemoveFinalizers(rf) => finalizers::remove(client, rf, backups).await,
        Action::DeleteApiService(d) => apiservice::delete(client, d, backups).await,
        Action::SetWebhookFailurePolicy(w) => webhook::fail_open(client, w, backups).await,
        Action::SetCrdConversionNone(c) => conversion::set_none(client, c, backups).await,
        Action::FinalizeNamespace(f) => namespace::finalize(client, f, backups).await,
    }
}

/// The record of one mutating step: its calls, backup and outcome.
struct Recorder {
    action: &'static str,
    path: String,
    /// Where the object is read (the finalize subresource is only written).
    read_path: String,
    calls: Vec<ApiCall>,
    backup: Option<PathBuf>,
    early: Option<StepOutcome>,
}

impl Recorder {
    fn new(action: &'static str, path: String) -> Self {
        Self {
            action,
            read_path: path.clone(),
            path,
            calls: Vec::new(),
            backup: None,
            early: None,
        }
    }

    fn call<T>(
        &mut self,
        method: &'static str,
        body: Option<serde_json::Value>,
        r: &Result<T, kube::Error>,
    ) {
        self.calls.push(ApiCall {
            method,
            path: self.path.clone(),
            body,
            result: result_text(r),
        });
    }

    /// Reads the object fresh and saves its manifest; no backup, no change.
    /// `None` (with the reason kept for [`Self::finish`]) when it is gone,
    /// unreadable or cannot be saved.
    async fn read_and_back_up<K>(
        &mut self,
        api: &Api<K>,
        name: &str,
        kind: &str,
        ns: Option<&str>,
        dir: &Path,
    ) -> Option<K>
    where
        K: Clone + serde::de::DeserializeOwned + Serialize + std::fmt::Debug,
    {
        let current = api.get_opt(name).await;
        self.calls.push(ApiCall {
            method: "GET",
            path: self.read_path.clone(),
            body: None,
            result: result_text(&current),
        });
        let obj = match current {
            Ok(Some(o)) => o,
            Ok(None) => {
                self.early = Some(StepOutcome::Skipped("already gone".into()));
                return None;
            }
            Err(e) => {
                self.early = Some(StepOutcome::Failed(crate::kube_error::text(&e)));
                return None;
            }
        };
        match save_backup(dir, kind, ns, name, &obj) {
            Ok(p) => self.backup = Some(p),
            Err(e) => {
                self.early = Some(StepOutcome::Failed(e.to_string()));
                return None;
            }
        }
        Some(obj)
    }

    /// Sends `patch` as one JSON patch to `name` and records the call.
    /// `None` (with the reason kept for [`Self::finish`]) when the plan's
    /// patch is not a JSON patch: nothing is sent then.
    async fn json_patch<K>(
        &mut self,
        api: &Api<K>,
        name: &str,
        patch: serde_json::Value,
    ) -> Option<Result<K, kube::Error>>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let parsed: json_patch::Patch = match serde_json::from_value(patch.clone()) {
            Ok(p) => p,
            Err(e) => {
                self.early = Some(StepOutcome::Failed(format!("bad patch: {e}")));
                return None;
            }
        };
        let r = api
            .patch(name, &PatchParams::default(), &Patch::<()>::Json(parsed))
            .await;
        self.call("PATCH", Some(patch), &r);
        Some(r)
    }

    /// Where the manifest was saved, for the outcome's "how to undo it".
    fn backup_text(&self) -> String {
        self.backup
            .as_ref()
            .map(|b| b.display().to_string())
            .unwrap_or_default()
    }

    fn finish(self) -> AppliedStep {
        let o = self
            .early
            .clone()
            .unwrap_or_else(|| StepOutcome::Failed("no outcome recorded".into()));
        self.end(o)
    }

    fn end(self, outcome: StepOutcome) -> AppliedStep {
        AppliedStep {
            action: self.action.to_string(),
            target: self.path,
            outcome,
            calls: self.calls,
            backup: self.backup,
        }
    }
}

fn observed(action: &str, o: StepOutcome) -> AppliedStep {
    outcome(action, "-", o, Vec::new(), None)
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

/// The record of a step that needs `--allow-webhook-changes` or
/// `--allow-crd-conversion-changes` when it was not given: skipped, saying
/// how to allow it.
pub fn not_consented(step: &PlannedStep) -> AppliedStep {
    match &step.action {
        Action::SetCrdConversionNone(c) => skipped(
            step.action.name(),
            &c.api_path(),
            &format!(
                "changing a CRD's conversion needs --allow-crd-conversion-changes={} besides --apply, once you know what its webhook did (objects are then read in every version with only apiVersion rewritten until it is restored); or restore Service {}",
                c.crd, c.service
            ),
        ),
        Action::SetWebhookFailurePolicy(w) => {
            skipped(step.action.name(), &w.api_path(), WEBHOOK_NOT_CONSENTED)
        }
        _ => skipped(step.action.name(), "-", WEBHOOK_NOT_CONSENTED),
    }
}

const WEBHOOK_NOT_CONSENTED: &str = "changing an admission webhook needs --allow-webhook-changes besides --apply (it lets through what the webhook would reject until it is restored); or restore the webhook's backend";

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::{StepOutcome, write_refused};

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: message.into(),
            ..Default::default()
        }))
    }

    fn moved(o: StepOutcome) -> bool {
        matches!(o, StepOutcome::Moved(_))
    }

    #[test]
    fn a_write_refused_because_the_object_moved_is_told_apart() {
        // What kube-apiserver answers when a JSON patch's `test` fails
        // (pinned against a real server in tests/doctor_cli.rs).
        let test_failed = "the server rejected our request due to an error in our request";
        assert!(moved(write_refused(&api_error(422, test_failed), true)));
        assert!(moved(write_refused(
            &api_error(
                409,
                "Operation cannot be fulfilled: the object has been modified"
            ),
            false
        )));
        // A 422 for anything but a JSON patch, a denial, a server error: no.
        assert!(!moved(write_refused(&api_error(422, test_failed), false)));
        assert!(!moved(write_refused(
            &api_error(422, "ConfigMap \"x\" is invalid: metadata.finalizers"),
            true
        )));
        assert!(!moved(write_refused(&api_error(403, "forbidden"), true)));
        assert!(!moved(write_refused(&api_error(500, "etcd timeout"), true)));
    }

    #[test]
    fn backups_are_private_to_their_owner() {
        let root = std::env::temp_dir().join(format!("unstuck-backup-test-{}", std::process::id()));
        let dir = root.join("nested");
        let secret = serde_json::json!({"kind": "Secret", "data": {"k": "c2VjcmV0"}});
        let path = super::save_backup(&dir, "Secret", Some("ns"), "s", &secret).expect("saved");
        let mode =
            |p: &std::path::Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&path), 0o600);
        std::fs::remove_dir_all(&root).expect("clean up");
    }
}

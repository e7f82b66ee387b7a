//! Putting a fixture object on the cluster: created with POST, never
//! written over. A name that is already taken is an error that names the
//! object, whatever holds it. The one exception is an object this very
//! run created and applies again (scenarios release a finalizer that way):
//! it is replaced only while it still has the UID the run recorded, with
//! the resourceVersion just read as the precondition, or created again
//! once it is gone.

use std::time::Duration;

use kube::{
    Api,
    api::{DynamicObject, PostParams},
};

use crate::wait::{self, Poll};

/// What the apply step made.
pub struct Made {
    pub uid: String,
    /// Replaced an object of this run's, rather than created one.
    pub replaced: bool,
}

/// How long a create may keep failing for reasons that pass: a kind whose
/// CRD was created a moment ago is not served yet (404).
const PATIENCE: Duration = Duration::from_secs(30);

/// Creates `doc` as `name`, or, when `ours` gives the UID this run
/// recorded for it, replaces that very object.
pub async fn create_or_replace_ours(
    api: &Api<DynamicObject>,
    doc: &serde_json::Value,
    name: &str,
    label: &str,
    ours: Option<&str>,
) -> Result<Made, String> {
    let obj: DynamicObject =
        serde_json::from_value(doc.clone()).map_err(|e| format!("{label}: {e}"))?;
    let r = match ours {
        None => {
            wait::until(format!("creating {label}"), PATIENCE, RETRY, || {
                create_once(api, &obj, label)
            })
            .await
        }
        Some(uid) => {
            wait::until(format!("replacing {label}"), PATIENCE, RETRY, || {
                replace_once(api, &obj, name, label, uid)
            })
            .await
        }
    };
    r.map_err(|e| e.to_string())?
}

const RETRY: Duration = Duration::from_millis(500);

/// Errors the server gives for a request that will never succeed as it is.
fn is_final(code: u16) -> bool {
    matches!(code, 400 | 403 | 409 | 422)
}

async fn create_once(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    label: &str,
) -> Poll<Result<Made, String>> {
    match api.create(&PostParams::default(), obj).await {
        Ok(made) => Poll::Ready(Ok(Made {
            uid: made.metadata.uid.unwrap_or_default(),
            replaced: false,
        })),
        Err(kube::Error::Api(ae)) if ae.code == 409 => Poll::Ready(Err(format!(
            "{label} already exists on this cluster and this run did not create it; \
             unstuck creates, it never writes over an object ({})",
            ae.message
        ))),
        Err(kube::Error::Api(ae)) if is_final(ae.code) => {
            Poll::Ready(Err(format!("creating {label}: {}", ae.message)))
        }
        Err(e) => Poll::Pending(e.to_string()),
    }
}

async fn replace_once(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    name: &str,
    label: &str,
    uid: &str,
) -> Poll<Result<Made, String>> {
    let current = match api.get_opt(name).await {
        Ok(Some(c)) => c,
        // This run's object was deleted (a scenario that installs a CRD
        // again after its removal): made again with POST, which never
        // writes over anything; the name is this run's own.
        Ok(None) => return create_once(api, obj, label).await,
        Err(e) => return Poll::Pending(e.to_string()),
    };
    if current.metadata.uid.as_deref() != Some(uid) {
        return Poll::Ready(Err(format!(
            "{label} is no longer the object this run created (UID {uid}, now {}); left alone",
            current.metadata.uid.unwrap_or_default()
        )));
    }
    let mut obj = obj.clone();
    obj.metadata.uid = Some(uid.to_string());
    obj.metadata.resource_version = current.metadata.resource_version;
    match api.replace(name, &PostParams::default(), &obj).await {
        Ok(made) => Poll::Ready(Ok(Made {
            uid: made.metadata.uid.unwrap_or_default(),
            replaced: true,
        })),
        // Changed since the read (a controller wrote to it): read again.
        Err(kube::Error::Api(ae)) if ae.code == 409 => Poll::Pending(ae.message),
        Err(kube::Error::Api(ae)) if is_final(ae.code) => {
            Poll::Ready(Err(format!("replacing {label}: {}", ae.message)))
        }
        Err(e) => Poll::Pending(e.to_string()),
    }
}

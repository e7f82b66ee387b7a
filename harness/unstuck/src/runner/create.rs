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

use crate::wait::{self, Poll, WaitTimeout};

/// Why a fixture object could not be put on the cluster.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("{label}: {source}")]
    Encode {
        label: String,
        source: serde_json::Error,
    },
    #[error(
        "{label} already exists on this cluster and this run did not create it; \
         unstuck creates, it never writes over an object ({message})"
    )]
    Taken { label: String, message: String },
    #[error("{verb} {label}: {message}")]
    Refused {
        verb: &'static str,
        label: String,
        message: String,
    },
    #[error("{label} is no longer the object this run created (UID {uid}, now {now}); left alone")]
    NotOurs {
        label: String,
        uid: String,
        now: String,
    },
    /// Kept failing for reasons that pass, past the patience.
    #[error(transparent)]
    TimedOut(#[from] WaitTimeout),
}

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
) -> Result<Made, CreateError> {
    let obj: DynamicObject =
        serde_json::from_value(doc.clone()).map_err(|source| CreateError::Encode {
            label: label.to_string(),
            source,
        })?;
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
    r?
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
) -> Poll<Result<Made, CreateError>> {
    match api.create(&PostParams::default(), obj).await {
        Ok(made) => Poll::Ready(Ok(Made {
            uid: made.metadata.uid.unwrap_or_default(),
            replaced: false,
        })),
        Err(kube::Error::Api(ae)) if ae.code == 409 => Poll::Ready(Err(CreateError::Taken {
            label: label.to_string(),
            message: ae.message,
        })),
        Err(kube::Error::Api(ae)) if is_final(ae.code) => Poll::Ready(Err(CreateError::Refused {
            verb: "creating",
            label: label.to_string(),
            message: ae.message,
        })),
        Err(e) => Poll::Pending(e.to_string()),
    }
}

async fn replace_once(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    name: &str,
    label: &str,
    uid: &str,
) -> Poll<Result<Made, CreateError>> {
    let current = match api.get_opt(name).await {
        Ok(Some(c)) => c,
        // This run's object was deleted (a scenario that installs a CRD
        // again after its removal): made again with POST, which never
        // writes over anything; the name is this run's own.
        Ok(None) => return create_once(api, obj, label).await,
        Err(e) => return Poll::Pending(e.to_string()),
    };
    if current.metadata.uid.as_deref() != Some(uid) {
        return Poll::Ready(Err(CreateError::NotOurs {
            label: label.to_string(),
            uid: uid.to_string(),
            now: current.metadata.uid.unwrap_or_default(),
        }));
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
        Err(kube::Error::Api(ae)) if is_final(ae.code) => Poll::Ready(Err(CreateError::Refused {
            verb: "replacing",
            label: label.to_string(),
            message: ae.message,
        })),
        Err(e) => Poll::Pending(e.to_string()),
    }
}

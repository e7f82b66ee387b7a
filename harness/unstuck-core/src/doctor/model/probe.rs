//! The collector's timed calls to backends that are there but fail: a
//! server-side dry-run through a failing webhook ([`WebhookProbe`]) and a
//! discovery call through the aggregator ([`ApiServiceProbe`]). What to
//! time is chosen in [`crate::doctor::backend`].

use serde::{Deserialize, Serialize};

/// One dry-run the collector made.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookProbe {
    /// The webhook whose failing calls were timed.
    pub webhook: String,
    /// `Kind namespace/name` of the object dry-run deleted.
    pub object: String,
    /// From the request to the apiserver's answer.
    pub elapsed_ms: u64,
    /// The apiserver's error; `None` when the dry-run was admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl WebhookProbe {
    /// One evidence line.
    pub fn line(&self) -> String {
        let secs = self.elapsed_ms as f64 / 1000.0;
        match &self.error {
            Some(e) => format!(
                "the doctor's server-side dry-run DELETE (dryRun=All) of {} was rejected after {secs:.2} s (measured): {e}",
                self.object
            ),
            None => format!(
                "the doctor's server-side dry-run DELETE (dryRun=All) of {} was admitted after {secs:.2} s (measured): the backend answered this time",
                self.object
            ),
        }
    }
}

/// One discovery call the collector made for an aggregated API whose
/// backend is there (ready endpoints) but whose APIService is unavailable:
/// `GET /apis/<group>/<version>` through the aggregator, as discovery and
/// the namespace controller make it, timed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceProbe {
    /// The APIService's name.
    pub api_service: String,
    /// `group/version` it serves.
    pub group_version: String,
    /// From the request to the answer (or to the collector's limit).
    pub elapsed_ms: u64,
    /// The apiserver's error, or that none came within the limit; `None`
    /// when the call was answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ApiServiceProbe {
    /// One evidence line.
    pub fn line(&self) -> String {
        let secs = self.elapsed_ms as f64 / 1000.0;
        let call = format!(
            "the doctor's GET /apis/{} through the aggregator (what discovery calls)",
            self.group_version
        );
        match &self.error {
            Some(e) => format!("{call} failed after {secs:.2} s (measured): {e}"),
            None => format!(
                "{call} was answered after {secs:.2} s (measured): the backend answered this time"
            ),
        }
    }
}

//! The verdict on a finalizer's owner ([`OwnerVerdict`]) and on one key
//! of one object ([`FinalizerVerdict`]). How the evidence is argued is
//! [`crate::doctor::owner`]'s.

use serde::{Deserialize, Serialize};

/// Whether a finalizer's owner is alive, dead or not known, with the
/// evidence for the verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all_fields = "camelCase")]
pub enum OwnerVerdict {
    /// A controller that serves the key is alive: leave it alone.
    Alive {
        /// Why it is considered alive.
        evidence: Vec<String>,
    },
    /// Nothing serves the key: it is an orphan.
    Dead {
        /// Why it is considered dead.
        evidence: Vec<String>,
    },
    /// Neither could be argued.
    Unknown {
        /// What was checked.
        evidence: Vec<String>,
    },
}

impl OwnerVerdict {
    /// The evidence lines, whatever the verdict.
    pub fn evidence(&self) -> &[String] {
        match self {
            OwnerVerdict::Alive { evidence }
            | OwnerVerdict::Dead { evidence }
            | OwnerVerdict::Unknown { evidence } => evidence,
        }
    }

    /// `Alive`, `Dead` or `Unknown`.
    pub fn label(&self) -> &'static str {
        match self {
            OwnerVerdict::Alive { .. } => "Alive",
            OwnerVerdict::Dead { .. } => "Dead",
            OwnerVerdict::Unknown { .. } => "Unknown",
        }
    }

    /// Whether the verdict is `Dead`.
    pub fn is_dead(&self) -> bool {
        matches!(self, OwnerVerdict::Dead { .. })
    }

    /// Whether the verdict is `Alive`.
    pub fn is_alive(&self) -> bool {
        matches!(self, OwnerVerdict::Alive { .. })
    }
}

/// The verdict on one finalizer key of one object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalizerVerdict {
    /// The key.
    pub finalizer: String,
    /// The verdict on its owner.
    #[serde(flatten)]
    pub verdict: OwnerVerdict,
    /// The verdict is `Dead` only because the operator named this key in
    /// `--assume-dead`: the evidence alone left it `Unknown`. The plan
    /// re-argues such a key and strips it only while it is still `Unknown`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub assumed_dead: bool,
}

/// The facts needed to remove orphan finalizers from one object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalizerRemoval {
    /// Plural resource name of the subject (for the API path).
    pub resource: String,
    /// `metadata.resourceVersion` when seen.
    pub resource_version: Option<String>,
    /// Seconds since the deletionTimestamp.
    pub age_seconds: i64,
    /// `metadata.finalizers` as seen (order kept).
    pub finalizers: Vec<String>,
    /// Keys argued dead: the ones to remove.
    pub orphan: Vec<String>,
    /// Keys that stay (owner alive, unknown, or protected).
    pub kept: Vec<String>,
    /// The verdict on every key.
    pub verdicts: Vec<FinalizerVerdict>,
}

//! What a [`PodStartCause::ImagePull`](super::finding::PodStartCause::ImagePull)
//! finding says about the pull: which image, what the registry did, in the
//! kubelet's own words. Reading those words, and explaining them, is
//! [`crate::doctor::finding::pull`]'s.

use serde::{Deserialize, Serialize};

/// The pull of one image that keeps a pod from starting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImagePull {
    /// The image as the pod names it.
    pub image: String,
    /// The registry host of [`Self::image`] (`docker.io` when it names none).
    pub registry: String,
    pub problem: PullProblem,
    /// The kubelet's words that show it: a `Failed` event's or the
    /// container's waiting message, or the `Pulling` event of a pull that
    /// has not ended.
    pub quote: String,
    /// The pod's `imagePullSecrets` (its service account's included: the
    /// admission plugin copies them into the pod).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pull_secrets: Vec<String>,
    /// Pull secrets the kubelet said it could not read
    /// (`FailedToRetrieveImagePullSecret`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_secrets: Vec<String>,
    /// For [`PullProblem::Slow`]: seconds since the kubelet's `Pulling`
    /// event, with no `Pulled` or `Failed` after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pulling_for_seconds: Option<i64>,
}

/// What the registry (or the way to it) did to the pull.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PullProblem {
    /// Nothing answers at the registry's address: `connection refused`,
    /// `no route to host`, `i/o timeout`, `no such host`.
    RegistryUnreachable,
    /// The registry answers but has no such manifest: `not found`,
    /// `manifest unknown`.
    NotFound,
    /// The registry wants credentials and the pod sends none:
    /// `401 Unauthorized` with no pull secret.
    NoCredentials,
    /// The registry refused the credentials the pod's pull secrets gave.
    CredentialsRefused,
    /// A pull secret the pod names could not be read by the kubelet.
    SecretMissing,
    /// The pull started and has not ended: the kubelet's `Pulling` event
    /// and nothing after it.
    Slow,
    /// `imagePullPolicy: Never` and the image is not on the node.
    NeverPull,
    /// The image name cannot be parsed.
    InvalidName,
    /// The kubelet's words say something else; they are quoted.
    Other,
}

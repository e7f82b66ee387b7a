//! The `container:` step: something outside the cluster an incident
//! needs, run as a container beside it. Today one image, the project's own
//! `unstuck.local/backend:dev` (`ci/images/backend.sh`), playing the
//! backend of an admission webhook or of an aggregated API, with a fault.
//!
//! ```yaml
//! - container:
//!     name: policy-backend          # a DNS label, unique in the scenario
//!     role: webhook                 # webhook | apiService
//!     fault: hang                   # none | hang | error500 | malformedReview
//!                                   # | unknownAuthority | expiredCertificate
//!     service: {namespace: policy, name: policy-webhook}
//!     register: backend-hang/webhook.yaml
//! ```
//!
//! The cluster reaches it the way it reaches a real backend: a Service
//! without a selector and an EndpointSlice naming the container's address.
//! `register` is the webhook configuration or APIService that calls it;
//! the runner points its `service` at that Service and sets its
//! `caBundle` to the CA the container's certificate is (or, for a TLS
//! fault, is not) signed by.

use std::{fmt, path::PathBuf};

use serde::{Deserialize, Serialize};

use super::located::{Located, Position};
use crate::text::quoted;

/// The only image there is: built offline, never pulled.
pub const BACKEND_IMAGE: &str = "unstuck.local/backend:dev";

fn default_image() -> Located<String> {
    Located::unlocated(BACKEND_IMAGE.to_string())
}

/// A container a scenario runs (see [`super::Step::Container`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerSpec {
    /// The scenario's name for it (a DNS label).
    pub name: Located<String>,
    /// Default [`BACKEND_IMAGE`], the only one allowed.
    #[serde(default = "default_image")]
    pub image: Located<String>,
    /// What it plays.
    pub role: ContainerRole,
    /// How it misbehaves (default `none`).
    #[serde(default)]
    pub fault: BackendFault,
    /// The Service, in one of the scenario's namespaces, it is reached by.
    pub service: ServiceRef,
    /// The registration that calls it: a manifest under fixtures/ holding a
    /// Validating/MutatingWebhookConfiguration (`role: webhook`) or an
    /// APIService (`role: apiService`).
    pub register: Located<PathBuf>,
}

/// What a backend container plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ContainerRole {
    /// An admission webhook: answers AdmissionReview v1.
    Webhook,
    /// An aggregated API's backend: answers `/apis/GROUP/VERSION`.
    ApiService,
}

/// How a backend misbehaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BackendFault {
    /// Answers as it should.
    #[default]
    None,
    /// Reads each request and never answers: the caller's timeout ends it.
    Hang,
    /// Answers every request with HTTP 500.
    Error500,
    /// Answers a review with an AdmissionReview that has no `response`.
    MalformedReview,
    /// Serves a certificate from a CA the registration's caBundle does not
    /// hold (a rotation the caBundle did not follow).
    UnknownAuthority,
    /// Serves a certificate, from the trusted CA, that has expired.
    ExpiredCertificate,
}

impl BackendFault {
    /// Its name as a scenario writes it (`fault: error500`).
    pub fn name(self) -> &'static str {
        match self {
            BackendFault::None => "none",
            BackendFault::Hang => "hang",
            BackendFault::Error500 => "error500",
            BackendFault::MalformedReview => "malformedReview",
            BackendFault::UnknownAuthority => "unknownAuthority",
            BackendFault::ExpiredCertificate => "expiredCertificate",
        }
    }
}

/// As a scenario writes it (`fault: error500`).
impl fmt::Display for BackendFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// As a scenario writes it (`role: apiService`).
impl fmt::Display for ContainerRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ContainerRole::Webhook => "webhook",
            ContainerRole::ApiService => "apiService",
        })
    }
}

/// A Service in one of the scenario's logical namespaces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceRef {
    pub namespace: Located<String>,
    pub name: Located<String>,
}

impl ContainerSpec {
    /// What the loader checks beyond the format: the image (the step's
    /// namespace, name and file go through the loader's common checks).
    pub fn check(&self) -> Result<(), (Position, String)> {
        if self.image.as_str() != BACKEND_IMAGE {
            return Err((
                self.image.position,
                format!(
                    "image {} is not one unstuck builds; the only container image is {BACKEND_IMAGE} (ci/images/backend.sh builds it offline)",
                    quoted(self.image.as_str())
                ),
            ));
        }
        Ok(())
    }
}

impl fmt::Display for ContainerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "container {} ({}, fault {}) behind Service {}/{}, registered by {}",
            *self.name,
            self.role,
            self.fault,
            *self.service.namespace,
            *self.service.name,
            self.register.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::BackendFault;

    #[test]
    fn a_backend_fault_is_named_as_a_scenario_writes_it() {
        for fault in [
            BackendFault::None,
            BackendFault::Hang,
            BackendFault::Error500,
            BackendFault::MalformedReview,
            BackendFault::UnknownAuthority,
            BackendFault::ExpiredCertificate,
        ] {
            let written: BackendFault =
                serde_json::from_value(serde_json::Value::String(fault.name().into())).unwrap();
            assert_eq!(written, fault);
        }
    }
}

//! Whether the Service behind an admission webhook or an aggregated
//! APIService is proven gone, from the collector's lookup of it
//! (`ServiceLookup`).
//!
//! Gone is a strong claim: it lets the doctor make a webhook fail open or
//! delete an APIService. It needs one of two proofs:
//! - the Service does not exist (its GET returned 404);
//! - the Service selects pods and no endpoint of it was ready at two
//!   reads at least [`SUSTAINED`] apart, while none of the pods its
//!   selector matches is starting or has restarted recently (a backend
//!   being rolled out or crash-looping is coming back, or may be).
//!
//! Everything else is not proof. An `ExternalName` Service points at a
//! DNS name the API does not show; a Service without a selector is served
//! by endpoints someone maintains by hand (or a controller outside the
//! cluster's own): its EndpointSlices with a ready endpoint show it
//! serving, and none ready shows nothing either way. A lookup that failed
//! (403, timeout) proves nothing, and neither does an aggregator's
//! condition reason on its own.
//!
//! Gone is one verdict. A backend that is there but fails the apiserver's
//! calls (it hangs past the timeout, answers 500 or a malformed review,
//! or its TLS does not verify) is another: `call` reads which from the
//! apiserver's own error, and such a backend is never called gone.

mod call;
mod judge;
mod pod;
mod probe;

use std::time::Duration;

pub use call::{CallFailure, CallVerdict, Misconfiguration, classify};
pub use judge::{judge, not_serving_cause};
pub use probe::{MAX_TRIES, api_service_probe_targets, probe_targets};

pub use super::model::probe::{ApiServiceProbe, WebhookProbe};
pub use super::model::service::{BackendPod, EndpointRead};

/// The verdict of a fail-closed webhook whose backend is installed but
/// has no ready endpoint (its pods Pending, crash-looping, or none): every
/// call fails at once. The only failing verdict whose gate the doctor may
/// open for its own write (`--allow-webhook-changes`): the backend could
/// not have checked that write anyway.
pub const NOT_SERVING: &str = "not serving";

/// How far apart two reads with no ready endpoint must be for the absence
/// to count as sustained. The collector waits this long between them.
pub const SUSTAINED: Duration = Duration::from_secs(5);

/// How recent a pod's start or restart must be to count as a backend
/// coming back (the owner verdict's window for "installed, not shown
/// running" is the same ten minutes).
pub const RECENT: Duration = Duration::from_secs(600);

/// The verdict on a backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendState {
    /// Proven gone; the reason is `ServiceNotFound` or `NoReadyEndpoints`.
    Gone(&'static str),
    /// Shown serving: a ready endpoint.
    Serving,
    /// Neither proven gone nor shown serving.
    Unknown,
}

/// A verdict and the evidence for it, quoted from the lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    pub state: BackendState,
    pub evidence: Vec<String>,
}

impl Judgement {
    fn new(state: BackendState, evidence: Vec<String>) -> Self {
        Self { state, evidence }
    }

    pub fn is_gone(&self) -> bool {
        matches!(self.state, BackendState::Gone(_))
    }
}

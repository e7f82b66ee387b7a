//! What the apiserver's own error says about a backend it called and
//! that failed it: not there to reach, there but too slow, or there and
//! answering wrongly. The words are kube-apiserver's (v1.34.4, recorded
//! from the `container:` scenarios 37-40 and read in its source):
//!
//! - admission (`apiserver/pkg/admission/plugin/webhook/validating/dispatcher.go`,
//!   recorded from scenarios 37-42):
//!   `failed calling webhook "NAME": failed to call webhook: ERR`, where
//!   ERR is the client's: `Post "https://SVC.NS.svc:443/PATH?timeout=5s":
//!   context deadline exceeded` (hang), `... tls: failed to verify
//!   certificate: x509: certificate signed by unknown authority` (a
//!   caBundle that does not match), `an error on the server ("BODY") has
//!   prevented the request from succeeding` (a 500); or `received invalid
//!   webhook response: webhook response was absent` /
//!   `expected response.uid=...` (`request/admissionreview.go`);
//! - aggregation (`kube-aggregator/.../remote_available_controller.go`):
//!   `failing or missing response from URL: Get "URL": context deadline
//!   exceeded (Client.Timeout exceeded while awaiting headers)`, `bad
//!   status from URL: 500`.
//!
//! The reading is kept to what the words prove. "context deadline
//! exceeded" says nothing answered in time: a backend that hangs, or an
//! address that drops packets; either way not a backend proven gone,
//! whose address would refuse or not resolve.

/// What a failed call shows about its backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallVerdict {
    /// Nothing there to call: the Service or its endpoints are missing, or
    /// the address refused the connection. Whether it is gone for good is
    /// [`super::judge`]'s to prove.
    Unreachable,
    /// No answer within the caller's timeout.
    Slow,
    /// An answer, and a wrong one.
    Misconfigured(Misconfiguration),
}

/// How a backend that answers gets it wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Misconfiguration {
    /// Its certificate does not verify against the registration's caBundle
    /// (rotated, expired, for another name).
    Tls,
    /// It answered with an HTTP error status.
    ServerError,
    /// Its AdmissionReview could not be used.
    BadReview,
}

/// A failed call, read from the apiserver's error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallFailure {
    pub verdict: CallVerdict,
    /// The words of the error that show it.
    pub quote: String,
    /// The timeout the caller set, from the URL's `?timeout=` (webhooks).
    pub timeout: Option<String>,
}

const TLS: [&str; 2] = ["x509: ", "tls: "];
const UNREACHABLE: [&str; 5] = [
    "no endpoints available for service",
    "connection refused",
    "no route to host",
    "no such host",
    "not found",
];
const BAD_REVIEW: [&str; 3] = [
    "received invalid webhook response",
    "webhook response was absent",
    "expected response.uid",
];
const SLOW: [&str; 3] = [
    "context deadline exceeded",
    "Client.Timeout exceeded",
    "request did not complete within requested timeout",
];

/// Reads a failed call out of `message` (a namespace condition, an
/// APIService condition, an admission error); `None` when it shows no
/// call that failed.
pub fn classify(message: &str) -> Option<CallFailure> {
    let timeout = message.split("?timeout=").nth(1).map(|t| {
        t.chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect()
    });
    let failure = |verdict, quote: String| {
        Some(CallFailure {
            verdict,
            quote,
            timeout: timeout.clone(),
        })
    };
    if let Some(q) = from_any(message, &TLS) {
        return failure(CallVerdict::Misconfigured(Misconfiguration::Tls), q);
    }
    if let Some(q) = between(
        message,
        "an error on the server (",
        "has prevented the request from succeeding",
    ) {
        return failure(CallVerdict::Misconfigured(Misconfiguration::ServerError), q);
    }
    if let Some(q) = from_any(message, &["bad status from "]) {
        return failure(CallVerdict::Misconfigured(Misconfiguration::ServerError), q);
    }
    if let Some(q) = from_any(message, &BAD_REVIEW) {
        return failure(CallVerdict::Misconfigured(Misconfiguration::BadReview), q);
    }
    if let Some(q) = from_any(message, &SLOW) {
        return failure(CallVerdict::Slow, q);
    }
    let calls = ["failed to call webhook", "failing or missing response"];
    if calls.iter().any(|c| message.contains(c))
        && let Some(at) = UNREACHABLE.iter().filter_map(|n| message.find(n)).min()
    {
        // The clause the words end: `service "x" not found`.
        let start = message[..at].rfind(": ").map_or(0, |i| i + 2);
        return failure(
            CallVerdict::Unreachable,
            message[start..].trim_end_matches('"').to_string(),
        );
    }
    None
}

/// From the first of `needles` to the end of that error (a closing quote
/// of the condition, or the end).
fn from_any(message: &str, needles: &[&str]) -> Option<String> {
    let start = needles.iter().filter_map(|n| message.find(n)).min()?;
    let rest = &message[start..];
    let end = rest.find("\"\n").unwrap_or(rest.len());
    Some(rest[..end].trim_end_matches(['"', ' ']).to_string())
}

fn between(message: &str, from: &str, to: &str) -> Option<String> {
    let start = message.find(from)?;
    let end = message[start..].find(to)? + start + to.len();
    Some(message[start..end].to_string())
}

impl CallFailure {
    /// One line: what the verdict is and why, the error quoted.
    pub fn line(&self) -> String {
        match &self.verdict {
            CallVerdict::Unreachable => format!(
                "the apiserver found nothing to call ({}): unreachable, not proven gone by that alone",
                self.quote
            ),
            CallVerdict::Slow => format!(
                "the backend did not answer within {} ({}): slow or hanging, not gone (a gone backend refuses or does not resolve)",
                self.timeout
                    .as_deref()
                    .map(|t| format!("the call's timeout of {t}"))
                    .unwrap_or_else(|| "the caller's timeout".into()),
                self.quote
            ),
            CallVerdict::Misconfigured(m) => format!(
                "the backend answers, wrongly: {} ({})",
                match m {
                    Misconfiguration::Tls => {
                        "its serving certificate does not verify against the registration's caBundle"
                    }
                    Misconfiguration::ServerError => "it answers with an HTTP error",
                    Misconfiguration::BadReview => "its AdmissionReview cannot be used",
                },
                self.quote
            ),
        }
    }

    /// What to do about it; never a change the doctor makes by itself.
    pub fn advice(&self) -> &'static str {
        match &self.verdict {
            CallVerdict::Unreachable => {
                "restore the backend's Service and endpoints, or remove the registration if the product is uninstalled"
            }
            CallVerdict::Slow => {
                "repair or restart the backend (it takes connections and does not answer in time)"
            }
            CallVerdict::Misconfigured(Misconfiguration::Tls) => {
                "make the registration's caBundle and the backend's serving certificate match again (re-issue the certificate or re-inject the caBundle, as the product's cert tooling does); the doctor never trusts a certificate the caBundle does not"
            }
            CallVerdict::Misconfigured(Misconfiguration::ServerError) => {
                "repair the backend (its own log says why it answers an error)"
            }
            CallVerdict::Misconfigured(Misconfiguration::BadReview) => {
                "repair the backend: it must answer an AdmissionReview v1 with response.uid of the request"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Recorded from scenarios 37-40 on v1.34.4 (local provider).
    const HANG: &str = r#"Failed to delete all resource types, 1 remaining: Internal error occurred: failed calling webhook "validate.policy.example.com": failed to call webhook: Post "https://policy-webhook.policy-s63ug9.svc:443/validate?timeout=5s": context deadline exceeded"#;
    const TLS_UNKNOWN: &str = r#"Failed to delete all resource types, 1 remaining: Internal error occurred: failed calling webhook "validate.policy.example.com": failed to call webhook: Post "https://policy-webhook.policy-74t5te.svc:443/validate?timeout=5s": tls: failed to verify certificate: x509: certificate signed by unknown authority"#;
    const E500: &str = r#"Failed to delete all resource types, 1 remaining: Internal error occurred: failed calling webhook "validate.policy.example.com": failed to call webhook: an error on the server ("unstuck-backend: internal error (fault error500)") has prevented the request from succeeding"#;
    const API_HANG: &str = r#"failing or missing response from https://172.18.0.2:8443/apis/metrics-mbz0iz.example.com/v1beta1: Get "https://172.18.0.2:8443/apis/metrics-mbz0iz.example.com/v1beta1": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"#;
    // Recorded from scenario 00 (dead-admission-webhook), v1.34.4.
    const GONE: &str = r#"Failed to delete all resource types, 1 remaining: Internal error occurred: failed calling webhook "validate.policy.example.com": failed to call webhook: Post "https://policy-webhook.policy-system.svc:443/validate?timeout=5s": service "policy-webhook" not found"#;

    #[test]
    fn a_hang_is_slow_with_the_calls_timeout() {
        let f = classify(HANG).unwrap();
        assert_eq!(f.verdict, CallVerdict::Slow);
        assert_eq!(f.timeout.as_deref(), Some("5s"));
        assert_eq!(f.quote, "context deadline exceeded");
        assert!(f.line().contains("timeout of 5s"), "{}", f.line());
        assert!(f.line().contains("not gone"));
        let a = classify(API_HANG).unwrap();
        assert_eq!(a.verdict, CallVerdict::Slow);
        assert!(a.quote.contains("Client.Timeout exceeded"), "{}", a.quote);
        // The aggregator's next check of the same hang, recorded on v1.34.4
        // and v1.37.2: the client's other wording of its timeout.
        let again = classify(r#"failing or missing response from https://172.26.0.2:8443/apis/metrics-8mczvz.example.com/v1beta1: Get "https://172.26.0.2:8443/apis/metrics-8mczvz.example.com/v1beta1": net/http: request canceled (Client.Timeout exceeded while awaiting headers)"#).unwrap();
        assert_eq!(again.verdict, CallVerdict::Slow);
    }

    #[test]
    fn tls_500_and_bad_reviews_are_misconfigured_with_the_words_quoted() {
        let t = classify(TLS_UNKNOWN).unwrap();
        assert_eq!(t.verdict, CallVerdict::Misconfigured(Misconfiguration::Tls));
        assert_eq!(
            t.quote,
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        );
        assert!(t.advice().contains("caBundle"));
        let e = classify(E500).unwrap();
        assert_eq!(
            e.verdict,
            CallVerdict::Misconfigured(Misconfiguration::ServerError)
        );
        assert!(e.quote.contains("fault error500"), "{}", e.quote);
        let api500 = classify("failing or missing response from https://10.0.0.1:443/apis/g/v1: bad status from https://10.0.0.1:443/apis/g/v1: 500").unwrap();
        assert_eq!(
            api500.verdict,
            CallVerdict::Misconfigured(Misconfiguration::ServerError)
        );
        // Recorded from scenario 41 (v1.34.4).
        let absent = classify(r#"Failed to delete all resource types, 1 remaining: Internal error occurred: failed calling webhook "validate.policy.example.com": received invalid webhook response: webhook response was absent"#).unwrap();
        assert_eq!(
            absent.verdict,
            CallVerdict::Misconfigured(Misconfiguration::BadReview)
        );
        // Recorded from scenario 42 (v1.34.4).
        let expired = classify(r#"Failed to delete all resource types, 1 remaining: Internal error occurred: failed calling webhook "validate.policy.example.com": failed to call webhook: Post "https://policy-webhook.policy-rf2x1m.svc:443/validate?timeout=5s": tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2026-11-25T16:12:45Z is after 2026-11-24T16:12:39Z"#).unwrap();
        assert_eq!(
            expired.verdict,
            CallVerdict::Misconfigured(Misconfiguration::Tls)
        );
        assert!(expired.quote.contains("has expired"), "{}", expired.quote);
    }

    #[test]
    fn a_missing_service_is_unreachable_and_other_text_is_no_call() {
        let g = classify(GONE).unwrap();
        assert_eq!(g.verdict, CallVerdict::Unreachable);
        assert!(g.quote.contains(r#"service "policy-webhook" not found"#));
        assert_eq!(
            classify("Failed to delete all resource types, 1 remaining: some other error"),
            None
        );
        assert_eq!(
            classify("All content successfully deleted, may be waiting on finalization"),
            None
        );
    }
}

//! How a Kubernetes API error reads in a report: the server's own words
//! and code, never kube's `Debug` of its `Status`, which its `Display`
//! appends (`ApiError: ... (Status { status: Some(Failure), ... })`).

/// `message (code Reason)` for an error the API server returned; the
/// client's own words for anything else (a timeout, a refused connection).
pub fn text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => {
            if s.reason.is_empty() {
                format!("{} ({})", s.message, s.code)
            } else {
                format!("{} ({} {})", s.message, s.code, s.reason)
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_error_reads_as_the_servers_words_without_debug_output() {
        // As kube-apiserver answers a refused webhook call (v1.34.4).
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 500, "reason": "InternalError",
            "message": "Internal error occurred: failed calling webhook \"validate.policy.example.com\": failed to call webhook: Post \"https://policy-webhook.app.svc:443/validate?timeout=5s\": service \"policy-webhook\" not found"
        }))
        .expect("a Status");
        let e = kube::Error::Api(Box::new(status));
        let t = text(&e);
        assert!(
            t.starts_with("Internal error occurred: failed calling webhook"),
            "{t}"
        );
        assert!(t.ends_with("(500 InternalError)"), "{t}");
        assert!(!t.contains("Status {"), "{t}");
        assert!(
            e.to_string().contains("Status {"),
            "kube's own text has the Debug dump"
        );
    }
}

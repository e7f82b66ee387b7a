//! The API server's clock. Every age the doctor judges (how long since a
//! deletion, a write, a restart) compares a timestamp the server wrote
//! with "now"; this machine's clock may be off by minutes (a laptop, a CI
//! runner without NTP), which would make a fresh write history or a fresh
//! deletion stuck. So "now" is the server's: its `Date` header on a cheap
//! request, taken at the midpoint of that request.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp, fmt::rfc2822::DateTimeParser};
use kube::Client;

/// `Date` has whole seconds, and the request takes time: a smaller
/// difference is measurement, not skew.
const NOISE: Duration = Duration::from_secs(2);

static PARSER: DateTimeParser = DateTimeParser::new();

/// How far the API server's clock is ahead of this machine's (negative:
/// behind); `None` when it could not be read (then this machine's clock is
/// used, as before).
pub async fn server_skew(client: &Client) -> Option<SignedDuration> {
    let request = http::Request::get("/version")
        .body(kube::client::Body::empty())
        .ok()?;
    let before = Timestamp::now();
    let response = tokio::time::timeout(Duration::from_secs(10), client.send(request))
        .await
        .ok()?
        .ok()?;
    let after = Timestamp::now();
    let date = response.headers().get(http::header::DATE)?.to_str().ok()?;
    skew_from(date, before, after)
}

/// The skew a `Date` header shows for a request sent at `before` and
/// answered at `after` (this machine's clock).
fn skew_from(date: &str, before: Timestamp, after: Timestamp) -> Option<SignedDuration> {
    let server = PARSER.parse_timestamp(date).ok()?;
    let midpoint = before.checked_add(after.duration_since(before) / 2).ok()?;
    let skew = server.duration_since(midpoint);
    Some(if skew.unsigned_abs() < NOISE {
        SignedDuration::ZERO
    } else {
        skew
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_header_minutes_behind_this_machine_is_a_negative_skew() {
        // This machine 3 minutes fast, as in issue 26.
        let before: Timestamp = "2026-11-29T10:03:00.100Z".parse().unwrap();
        let after: Timestamp = "2026-11-29T10:03:00.300Z".parse().unwrap();
        let skew = skew_from("Sun, 29 Nov 2026 10:00:00 GMT", before, after).unwrap();
        assert_eq!(skew.as_secs(), -180);
    }

    #[test]
    fn under_two_seconds_is_noise_and_a_bad_header_is_none() {
        let before: Timestamp = "2026-11-29T10:00:00.400Z".parse().unwrap();
        let after: Timestamp = "2026-11-29T10:00:00.600Z".parse().unwrap();
        assert_eq!(
            skew_from("Sun, 29 Nov 2026 10:00:01 GMT", before, after),
            Some(SignedDuration::ZERO)
        );
        assert_eq!(skew_from("yesterday", before, after), None);
    }
}

//! Waiting with a deadline that says what it waited for. Every wait in
//! unstuck goes through here, so a timeout always names the thing that
//! never happened and the last thing seen.

use std::{future::Future, time::Duration};

/// A wait that ran out of time.
#[derive(Debug, thiserror::Error)]
#[error(
    "timed out after {waited} waiting for {what}; last seen: {last}",
    waited = unstuck_core::duration::Duration::from(*.waited)
)]
pub struct WaitTimeout {
    pub what: String,
    pub waited: Duration,
    pub last: String,
}

/// What one poll saw: done with a value, or not yet with a description.
pub enum Poll<T> {
    Ready(T),
    Pending(String),
}

/// Polls `check` every `interval` until it is ready or `timeout` passes.
pub async fn until<T, F, Fut>(
    what: impl Into<String>,
    timeout: Duration,
    interval: Duration,
    mut check: F,
) -> Result<T, WaitTimeout>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Poll<T>>,
{
    let what = what.into();
    let start = tokio::time::Instant::now();
    loop {
        let last = match check().await {
            Poll::Ready(v) => return Ok(v),
            Poll::Pending(seen) => seen,
        };
        if start.elapsed() >= timeout {
            return Err(WaitTimeout {
                what,
                waited: start.elapsed(),
                last,
            });
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_timeout_names_what_and_the_last_observation() {
        let mut n = 0;
        let err = until(
            "the answer",
            Duration::from_millis(50),
            Duration::from_millis(10),
            || {
                n += 1;
                let seen = format!("attempt {n}");
                async move { Poll::<()>::Pending(seen) }
            },
        )
        .await
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("waiting for the answer"), "{text}");
        assert!(text.contains("last seen: attempt"), "{text}");
    }

    #[tokio::test]
    async fn a_ready_poll_returns_its_value() {
        let v = until(
            "x",
            Duration::from_secs(1),
            Duration::from_millis(1),
            || async { Poll::Ready(7) },
        )
        .await
        .unwrap();
        assert_eq!(v, 7);
    }
}

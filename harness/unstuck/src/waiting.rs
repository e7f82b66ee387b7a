//! What a command is waiting for, said while it waits: a cluster's boot,
//! the doctor's settling. On a terminal one live line, redrawn every
//! second (what, for how long, out of which bound); anywhere else (a CI
//! log) a plain line every few seconds, so that a silent minute never
//! reads as a hang. Off until a command turns it on ([`enable`]): the
//! scenarios of a run have their own progress board, and a library user
//! gets nothing on its stderr it did not ask for.

use std::{
    collections::BTreeMap,
    io::{IsTerminal as _, Write as _},
    sync::{
        LazyLock, Mutex, Once,
        atomic::{AtomicU8, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

/// How waits are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Off,
    /// One line, redrawn in place.
    Live,
    /// A line of its own every [`PLAIN_EVERY`] of a wait.
    Plain,
}

/// How often a plain line is printed while a wait lasts, unless
/// `UNSTUCK_PROGRESS_EVERY` (whole seconds, at least 1) says otherwise.
pub const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// [`PLAIN_EVERY`], or `UNSTUCK_PROGRESS_EVERY`.
fn plain_every() -> Duration {
    std::env::var("UNSTUCK_PROGRESS_EVERY")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s >= 1)
        .map_or(PLAIN_EVERY, Duration::from_secs)
}

static MODE: AtomicU8 = AtomicU8::new(0);
static NEXT: AtomicU64 = AtomicU64::new(0);
static WAITS: LazyLock<Mutex<BTreeMap<u64, Wait>>> = LazyLock::new(Default::default);
static TICKER: Once = Once::new();

struct Wait {
    what: String,
    bound: Duration,
    since: Instant,
}

/// Turns the line on: live on a terminal, plain elsewhere.
pub fn enable() {
    set_mode(if std::io::stderr().is_terminal() {
        Mode::Live
    } else {
        Mode::Plain
    });
}

/// Turns the line off (a live one is cleared at the next tick).
pub fn disable() {
    set_mode(Mode::Off);
}

fn set_mode(mode: Mode) {
    MODE.store(mode as u8, Ordering::Relaxed);
    if mode != Mode::Off {
        TICKER.call_once(|| {
            // A thread, not a task: it keeps drawing while the runtime's
            // threads are busy, and needs no runtime to start.
            let _ = std::thread::Builder::new()
                .name("unstuck-waiting".into())
                .spawn(tick);
        });
    }
}

fn mode() -> Mode {
    match MODE.load(Ordering::Relaxed) {
        1 => Mode::Live,
        2 => Mode::Plain,
        _ => Mode::Off,
    }
}

/// Shows that `what` is awaited, for at most `bound`, until the returned
/// guard is dropped. With several at once, the latest is shown.
pub fn show(what: impl Into<String>, bound: Duration) -> Shown {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut w) = WAITS.lock() {
        w.insert(
            id,
            Wait {
                what: what.into(),
                bound,
                since: Instant::now(),
            },
        );
    }
    Shown(id)
}

/// A wait being shown; dropping it ends the showing.
#[must_use = "the wait is shown only while this lives"]
pub struct Shown(u64);

impl Drop for Shown {
    fn drop(&mut self) {
        if let Ok(mut w) = WAITS.lock() {
            w.remove(&self.0);
        }
    }
}

/// The line for a wait of `what` that has lasted `elapsed` of `bound`.
pub fn line(what: &str, elapsed: Duration, bound: Duration) -> String {
    format!(
        "waiting for {what}: {} of at most {}",
        clock(elapsed),
        clock(bound)
    )
}

/// `42 s`, `3 min 05 s`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s} s")
    } else {
        format!("{} min {:02} s", s / 60, s % 60)
    }
}

/// The latest wait's line, if one lasts.
fn current() -> Option<(String, Duration)> {
    let w = WAITS.lock().ok()?;
    let (_, wait) = w.iter().next_back()?;
    let elapsed = wait.since.elapsed();
    Some((line(&wait.what, elapsed, wait.bound), elapsed))
}

/// The ticker's loop: once a second, a live line is redrawn (cleared when
/// nothing is awaited); a plain one printed every [`plain_every`] of a wait.
fn tick() {
    let every = plain_every();
    let mut drawn = false;
    let mut last_plain: Option<Instant> = None;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = current();
        let mut err = std::io::stderr().lock();
        match (mode(), now) {
            (Mode::Live, Some((text, _))) => {
                // Cut to a terminal's usual width: a wrapped line cannot
                // be redrawn in place.
                let text: String = text.chars().take(110).collect();
                let _ = write!(err, "\r\x1b[2K  … {text}");
                drawn = true;
            }
            (Mode::Plain, Some((text, elapsed))) if elapsed >= every => {
                if last_plain.is_none_or(|t| t.elapsed() >= every) {
                    let _ = writeln!(err, "[unstuck] still {text}");
                    last_plain = Some(Instant::now());
                }
            }
            _ => {
                if drawn {
                    let _ = write!(err, "\r\x1b[2K");
                    drawn = false;
                }
            }
        }
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_what_how_long_and_the_bound() {
        assert_eq!(
            line(
                "node Ready",
                Duration::from_secs(42),
                Duration::from_secs(185)
            ),
            "waiting for node Ready: 42 s of at most 3 min 05 s"
        );
    }

    #[test]
    fn the_latest_wait_is_the_one_shown_and_a_dropped_one_goes() {
        let outer = show("the outer thing", Duration::from_secs(10));
        let inner = show("the inner thing", Duration::from_secs(10));
        assert!(current().unwrap().0.contains("the inner thing"));
        drop(inner);
        assert!(current().unwrap().0.contains("the outer thing"));
        drop(outer);
        // Other tests of this binary may show waits of their own at the
        // same time; none of these two is left.
        assert!(current().is_none_or(|(t, _)| !t.contains("the outer thing")));
    }
}

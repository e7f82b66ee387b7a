//! What each running scenario is doing right now, for the progress lines a
//! person at a terminal sees while the harness waits (CI logs, which are
//! not terminals, get only the start and end lines).

use std::{
    collections::BTreeMap,
    io::IsTerminal,
    sync::{LazyLock, Mutex},
    time::{Duration, Instant},
};

static BOARD: LazyLock<Mutex<BTreeMap<String, (String, Instant)>>> =
    LazyLock::new(Default::default);

/// Records that `scenario` started `step`.
pub fn set(scenario: &str, step: String) {
    if let Ok(mut b) = BOARD.lock() {
        b.insert(scenario.to_string(), (step, Instant::now()));
    }
}

/// Records that `scenario` finished.
pub fn clear(scenario: &str) {
    if let Ok(mut b) = BOARD.lock() {
        b.remove(scenario);
    }
}

/// One line per running scenario: its current step and for how long.
pub fn lines() -> Vec<String> {
    BOARD
        .lock()
        .map(|b| {
            b.iter()
                .map(|(name, (step, since))| {
                    format!(
                        "  … {name}: {step} ({:.0} s)",
                        since.elapsed().as_secs_f64()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Prints the board every few seconds while stderr is a terminal; the
/// returned task is aborted when the run ends.
pub fn start_ticker() -> Option<tokio::task::JoinHandle<()>> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    Some(tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            for l in lines() {
                eprintln!("{l}");
            }
        }
    }))
}

//! Colour on a terminal, the way command-line tools agree on: on when
//! stdout is a terminal, off when it is not, off whenever `NO_COLOR` is
//! set to anything (<https://no-color.org>), and `--color always|never`
//! over both. Only verdict words are painted (PASS, FAIL, a finding's
//! kind, a target's state); what a CI log or a pipe gets stays plain.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, Ordering};

static ON: AtomicBool = AtomicBool::new(false);

/// `--color`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set.
    #[default]
    Auto,
    Always,
    Never,
}

/// Decides, once, from `choice`, stdout and the environment.
pub fn init(choice: ColorChoice) {
    let on = match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    };
    ON.store(on, Ordering::Relaxed);
}

/// Whether text is painted.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

fn paint(code: &str, text: &str) -> String {
    paint_if(enabled(), code, text)
}

fn paint_if(on: bool, code: &str, text: &str) -> String {
    if on {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// Passed, gone, healed.
pub fn good(text: &str) -> String {
    paint("32", text)
}

/// Failed, still stuck.
pub fn bad(text: &str) -> String {
    paint("1;31", text)
}

/// Stopped, left, waiting.
pub fn note(text: &str) -> String {
    paint("33", text)
}

/// A name to find in a long report (a finding's kind).
pub fn strong(text: &str) -> String {
    paint("1", text)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The switch itself is process-wide (other tests read it): what is
    // tested here is the painting, and the CLI test the switch.
    #[test]
    fn painted_only_when_on() {
        assert_eq!(paint_if(false, "1;31", "FAIL"), "FAIL");
        assert_eq!(paint_if(true, "1;31", "FAIL"), "\x1b[1;31mFAIL\x1b[0m");
    }
}

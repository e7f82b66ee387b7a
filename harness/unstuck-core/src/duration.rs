//! Durations written as `500ms`, `30s`, `2m`, `1m30s`, `1h`.
//!
//! Scenario files are read by people, so a timeout is written the way
//! `kubectl wait --timeout` and Go's `time.ParseDuration` write it, not as a
//! bare number of seconds whose unit the reader has to guess. The grammar is
//! deliberately smaller than Go's: whole numbers only, the units `h`, `m`,
//! `s`, `ms`, each at most once and from the largest to the smallest. That
//! leaves exactly one way to write most values, and [`Duration`]'s `Display`
//! prints that way, so a duration read from a file is shown back the same.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use crate::text::quoted;

/// A span of time written in a scenario file, such as a step timeout.
///
/// A thin newtype over [`std::time::Duration`] that knows how to read and
/// write the `1m30s` notation. Precision is one millisecond: that is the
/// smallest unit the notation has, and `Display` drops anything finer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(std::time::Duration);

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(std::time::Duration::ZERO);

    /// A duration of `millis` milliseconds.
    pub const fn from_millis(millis: u64) -> Self {
        Duration(std::time::Duration::from_millis(millis))
    }

    /// A duration of `secs` seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Duration(std::time::Duration::from_secs(secs))
    }

    /// A duration of `mins` minutes.
    pub const fn from_mins(mins: u64) -> Self {
        Duration(std::time::Duration::from_secs(mins * 60))
    }

    /// The standard library duration, for `tokio::time::timeout` and friends.
    pub const fn as_std(self) -> std::time::Duration {
        self.0
    }

    /// Whether this is no time at all (never a useful timeout).
    pub const fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Duration(d)
    }
}

impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> Self {
        d.0
    }
}

/// The units, largest first. Order matters twice: a unit must be written
/// after every larger one, and `ms` must be tried before `m` when reading.
const UNITS: [(&str, u128); 4] = [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];

/// What the notation looks like, repeated in every error so the reader does
/// not have to look it up.
const EXPECTED: &str =
    "a whole number followed by a unit (h, m, s, ms), like 500ms, 30s, 2m, 1m30s or 1h";

/// Why a string is not a [`Duration`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {}: {reason}; expected {EXPECTED}", quoted(.input))]
pub struct ParseDurationError {
    input: String,
    reason: String,
}

impl ParseDurationError {
    fn new(input: &str, reason: impl Into<String>) -> Self {
        ParseDurationError {
            input: input.to_owned(),
            reason: reason.into(),
        }
    }

    /// The text that failed to parse.
    pub fn input(&self) -> &str {
        &self.input
    }

    /// What was wrong with it, without the reminder of the expected form.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl FromStr for Duration {
    type Err = ParseDurationError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| ParseDurationError::new(input, reason);
        if input.is_empty() {
            return Err(err("it is empty".into()));
        }
        if input.chars().any(char::is_whitespace) {
            return Err(err("it contains spaces".into()));
        }
        if input.starts_with(['-', '+']) {
            return Err(err("durations have no sign".into()));
        }

        let mut rest = input;
        let mut total_ms: u128 = 0;
        // Index into UNITS of the last unit seen: the next one must be smaller.
        let mut last_unit: Option<usize> = None;
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if digits == 0 {
                return Err(err(format!(
                    "expected a number at {rest}",
                    rest = quoted(rest)
                )));
            }
            let (number, after) = rest.split_at(digits);
            if after.starts_with(['.', ',']) {
                return Err(err(
                    "fractions are not supported (write 1m30s rather than 1.5m)".into(),
                ));
            }
            let unit_len = after
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(after.len());
            let unit = &after[..unit_len];
            if unit.is_empty() {
                return Err(err(format!(
                    "{number} has no unit (write {number}s for seconds)"
                )));
            }
            let Some(index) = UNITS.iter().position(|(name, _)| *name == unit) else {
                return Err(err(format!("unknown unit {unit}", unit = quoted(unit))));
            };
            if let Some(last) = last_unit
                && index <= last
            {
                return Err(err(format!(
                    "unit {unit} comes after {}; write each unit once, largest first",
                    quoted(UNITS[last].0),
                    unit = quoted(unit)
                )));
            }
            last_unit = Some(index);
            // A u128 of milliseconds cannot overflow from a parse of a
            // reasonable string, but a u64 of seconds can; check both.
            let value: u128 = number
                .parse()
                .map_err(|_| err(format!("{number} is too large")))?;
            total_ms = value
                .checked_mul(UNITS[index].1)
                .and_then(|ms| total_ms.checked_add(ms))
                .ok_or_else(|| err("it is too large".into()))?;
            rest = &after[unit_len..];
        }

        let secs = u64::try_from(total_ms / 1000).map_err(|_| err("it is too large".into()))?;
        let millis = (total_ms % 1000) as u64;
        Ok(Duration(
            std::time::Duration::from_secs(secs) + std::time::Duration::from_millis(millis),
        ))
    }
}

impl fmt::Display for Duration {
    /// Writes the canonical form: each non-zero unit once, largest first
    /// (`90s` is written `1m30s`, `1500ms` is written `1s500ms`); zero is `0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ms = self.0.as_millis();
        if ms == 0 {
            return f.write_str("0s");
        }
        let mut out = String::new();
        for (unit, size) in UNITS {
            let n = ms / size;
            if n > 0 {
                out.push_str(&n.to_string());
                out.push_str(unit);
                ms -= n * size;
            }
        }
        f.write_str(&out)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;

        impl de::Visitor<'_> for DurationVisitor {
            type Value = Duration;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a duration: {EXPECTED}")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                v.parse().map_err(E::custom)
            }

            // A bare number is the most likely mistake (`timeout: 60`): say
            // that the unit is missing rather than that a string was expected.
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
                self.visit_str(&v.to_string())
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
                self.visit_str(&v.to_string())
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
                self.visit_str(&v.to_string())
            }
        }

        // `deserialize_any` so that numbers and other wrong types reach our
        // visitor and get our message, not the YAML library's "expected string".
        deserializer.deserialize_any(DurationVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms_print_back_unchanged() {
        for text in [
            "500ms",
            "30s",
            "2m",
            "1m30s",
            "1h",
            "1h2m3s4ms",
            "0s",
            "1s500ms",
        ] {
            let d: Duration = text.parse().unwrap();
            assert_eq!(d.to_string(), text);
        }
    }

    #[test]
    fn non_canonical_forms_are_normalised_when_printed() {
        let d: Duration = "90s".parse().unwrap();
        assert_eq!(d.to_string(), "1m30s");
        let d: Duration = "1500ms".parse().unwrap();
        assert_eq!(d.to_string(), "1s500ms");
    }

    #[test]
    fn errors_say_what_was_expected() {
        let e = "30 seconds".parse::<Duration>().unwrap_err();
        assert_eq!(e.reason(), "it contains spaces");
        assert!(
            e.to_string().contains("like 500ms, 30s, 2m, 1m30s or 1h"),
            "{e}"
        );
    }
}

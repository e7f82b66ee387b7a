//! Durations written as `30s`, `2m`, `1m30s`.

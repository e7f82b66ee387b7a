//! Lists and names in messages, written for a person reading a report
//! rather than as Rust's `Debug` text: `[a, b]` and `'name'`, never
//! `["a", "b"]` or `Some("x")`.

/// `[a, b]`; `[]` for none.
pub fn list<T: AsRef<str>>(items: &[T]) -> String {
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("[{}]", items.join(", "))
}

/// The value, or `none`.
pub fn or_none(value: Option<&str>) -> &str {
    value.unwrap_or("none")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_absent_values_read_as_words() {
        assert_eq!(
            list(&["kubernetes", "example.com/cleanup"]),
            "[kubernetes, example.com/cleanup]"
        );
        assert_eq!(list::<String>(&[]), "[]");
        assert_eq!(
            or_none(Some("2026-12-07T18:00:00Z")),
            "2026-12-07T18:00:00Z"
        );
        assert_eq!(or_none(None), "none");
    }
}

//! Names, lists and absent values in messages, written for a person
//! reading a report rather than left to Rust's `Debug` text, whose exact
//! form is the standard library's to change: `"name"`, `[a, b]` and
//! `none`, never `Some("x")`.

use std::fmt::{self, Display, Write};

/// A name or value quoted as `"text"`: what a user typed or an API
/// returned, so that spaces, an empty string or a stray quote stay visible.
pub fn quoted(text: &str) -> Quoted<'_> {
    Quoted(text)
}

/// See [`quoted`].
#[derive(Clone, Copy)]
pub struct Quoted<'a>(&'a str);

impl Display for Quoted<'_> {
    /// Escapes as `Debug` of a `str` always has, byte for byte, so that
    /// messages and the tests and scripts that match them keep their text:
    /// `char::escape_debug` for each character but the single quote, which
    /// a double-quoted string leaves as it is. (`str::escape_debug` differs
    /// on both `'` and a combining mark after the first character.)
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        for c in self.0.chars() {
            if c == '\'' {
                f.write_char(c)?;
            } else {
                for e in c.escape_debug() {
                    f.write_char(e)?;
                }
            }
        }
        f.write_char('"')
    }
}

/// `[a, b]`; `[]` for none.
pub fn list<T: AsRef<str>>(items: &[T]) -> String {
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("[{}]", items.join(", "))
}

/// `["a", "b"]`, each item [`quoted`]: for lists whose items may hold
/// spaces or be empty, where the quotes are part of what is said.
pub fn quoted_list<T: AsRef<str>>(items: &[T]) -> String {
    let items: Vec<String> = items
        .iter()
        .map(|i| quoted(i.as_ref()).to_string())
        .collect();
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
    fn quoted_text_is_what_debug_of_a_str_printed() {
        for s in [
            "",
            "plain",
            "it's",
            "a \"b\"",
            "back\\slash",
            "nl\n\t\r",
            "\u{301}x\u{301}y",
            "é 日本 😀",
            "\u{0}\u{7f}\u{200b}\u{feff}",
        ] {
            assert_eq!(quoted(s).to_string(), format!("{s:?}"));
        }
        assert_eq!(quoted("it's").to_string(), r#""it's""#);
        assert_eq!(quoted_list(&["a b", ""]), format!("{:?}", ["a b", ""]));
    }

    #[test]
    fn lists_and_absent_values_read_as_words() {
        assert_eq!(
            list(&["kubernetes", "example.com/cleanup"]),
            "[kubernetes, example.com/cleanup]"
        );
        assert_eq!(list::<String>(&[]), "[]");
        assert_eq!(quoted_list::<String>(&[]), "[]");
        assert_eq!(
            or_none(Some("2026-12-07T18:00:00Z")),
            "2026-12-07T18:00:00Z"
        );
        assert_eq!(or_none(None), "none");
    }
}

//! Values that remember where in the scenario file they were written.
//!
//! Most mistakes in a scenario are not YAML errors but well-formed values
//! that make no sense: a namespace nobody declared, a kind without an
//! apiVersion. They are found after parsing, and the error must still point
//! at the line a person has to fix. serde-saphyr's `Spanned<T>` records the
//! location of a node while it is parsed; [`Located<T>`] keeps that location
//! in our own small [`Position`] type so the model does not expose the YAML
//! library in its public API.

use std::{fmt, ops::Deref};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A 1-based line and column in a scenario file (columns count characters,
/// not bytes). Line 0 means the position is unknown: the value was filled in
/// by a default rather than written in the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// 1-based line number; 0 when unknown.
    pub line: u64,
    /// 1-based column, counted in characters; 0 when unknown.
    pub column: u64,
}

impl Position {
    /// The position of a value that was not written in the file.
    pub const UNKNOWN: Position = Position { line: 0, column: 0 };

    /// A known position.
    pub const fn new(line: u64, column: u64) -> Self {
        Position { line, column }
    }

    /// Whether the position points into the file.
    pub const fn is_known(self) -> bool {
        self.line > 0
    }

    /// `self` if known, otherwise `fallback`: a defaulted value is blamed on
    /// the nearest thing that was written, such as its enclosing step.
    pub const fn or(self, fallback: Position) -> Position {
        if self.is_known() { self } else { fallback }
    }
}

impl From<serde_saphyr::Location> for Position {
    fn from(loc: serde_saphyr::Location) -> Self {
        Position {
            line: loc.line(),
            column: loc.column(),
        }
    }
}

impl fmt::Display for Position {
    /// `line:column`, the form editors and terminals turn into links.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// A value together with the [`Position`] it was written at.
///
/// Dereferences to the value, prints as the value and serializes as the
/// value, so code that does not care where a thing was written can ignore
/// the wrapper. Equality compares the values only: two scenarios that say
/// the same thing are equal wherever they said it, which is what tests and
/// de-duplication want.
#[derive(Clone, Debug, Default)]
pub struct Located<T> {
    /// The value.
    pub value: T,
    /// Where it was written (for aliases: where it was used).
    pub position: Position,
}

impl<T> Located<T> {
    /// A value at a known position.
    pub const fn new(value: T, position: Position) -> Self {
        Located { value, position }
    }

    /// A value that was not written in a file (a default, or built in code).
    pub const fn unlocated(value: T) -> Self {
        Located {
            value,
            position: Position::UNKNOWN,
        }
    }

    /// The value, dropping the position.
    pub fn into_inner(self) -> T {
        self.value
    }
}

impl<T> From<T> for Located<T> {
    fn from(value: T) -> Self {
        Located::unlocated(value)
    }
}

impl<T> Deref for Located<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> AsRef<T> for Located<T> {
    fn as_ref(&self) -> &T {
        &self.value
    }
}

impl<T: PartialEq> PartialEq for Located<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<T: Eq> Eq for Located<T> {}

impl<T: fmt::Display> fmt::Display for Located<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

impl<T: Serialize> Serialize for Located<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Located<T> {
    /// Reads the value through serde-saphyr's `Spanned<T>`, which asks the
    /// YAML deserializer for the node's location. Other deserializers (JSON,
    /// serde's buffering for untagged enums) hand over the bare value, and
    /// the position is then [`Position::UNKNOWN`].
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = serde_saphyr::Spanned::<T>::deserialize(deserializer)?;
        Ok(Located {
            value: spanned.value,
            position: spanned.referenced.into(),
        })
    }
}

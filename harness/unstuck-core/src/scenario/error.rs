//! Errors from loading scenario files.
//!
//! Every error about a file's content renders as `path:line:column: message`,
//! the form compilers use and that editors, terminals and CI log viewers
//! turn into links, followed by the offending line and a caret.

use std::{
    fmt, io,
    path::{Path, PathBuf},
};

use super::located::Position;

/// A problem at a place in a scenario file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The scenario file, as given to the loader.
    pub path: PathBuf,
    /// Where in it; [`Position::UNKNOWN`] when the YAML library could not
    /// say (rare).
    pub position: Position,
    /// What is wrong, without the location.
    pub message: String,
    /// The text of the line at `position`, for the caret display.
    pub source_line: Option<String>,
}

impl Diagnostic {
    /// A diagnostic for `position` in the file at `path` whose text is `src`.
    pub fn new(path: &Path, src: &str, position: Position, message: impl Into<String>) -> Self {
        let source_line = match position.line {
            0 => None,
            line => src.lines().nth((line - 1) as usize).map(str::to_owned),
        };
        Diagnostic {
            path: path.to_owned(),
            position,
            message: sanitize(&message.into()),
            source_line,
        }
    }

    /// The first line alone: `path:line:column: message`. For logs and
    /// reports that want one line per error.
    pub fn headline(&self) -> String {
        if self.position.is_known() {
            format!(
                "{}:{}: {}",
                self.path.display(),
                self.position,
                self.message
            )
        } else {
            format!("{}: {}", self.path.display(), self.message)
        }
    }
}

impl fmt::Display for Diagnostic {
    /// The headline, then (when the line is known) a rustc-style excerpt:
    ///
    /// ```text
    /// scenarios/x.yaml:3:25: unknown field `nme`, expected one of ...
    ///   |
    /// 3 |   - delete: {kind: Pod, nme: x}
    ///   |                         ^
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.headline())?;
        let Some(line) = &self.source_line else {
            return Ok(());
        };
        let number = self.position.line.to_string();
        let gutter = " ".repeat(number.len());
        // Keep tabs in the padding so the caret lines up under a tab-indented line.
        let pad: String = line
            .chars()
            .take(self.position.column.saturating_sub(1) as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "\n{gutter} |\n{number} | {line}\n{gutter} | {pad}^")
    }
}

/// Replaces control characters (other than tab) so a hostile or binary
/// file cannot write escape sequences to the terminal through an error.
fn sanitize(message: &str) -> String {
    message
        .chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect()
}

/// Why a scenario could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file (or the scenario directory) could not be read.
    #[error("{}: failed to read: {source}", path.display())]
    Read {
        /// What could not be read.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
    /// The file is not valid YAML, or does not fit the scenario format: an
    /// unknown key, a wrong type, a missing field, a duplicate key.
    #[error("{0}")]
    Parse(Diagnostic),
    /// The file fits the format but says something impossible: a bad name,
    /// no steps, a namespace it never declared, a kind without apiVersion.
    #[error("{0}")]
    Invalid(Diagnostic),
    /// An `apply` step names a fixture file that does not exist. Reported by
    /// [`Scenario::validate_fixtures`](super::Scenario::validate_fixtures).
    #[error("{0}")]
    MissingFixture(Diagnostic),
}

impl LoadError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            LoadError::Read { path, .. } => path,
            LoadError::Parse(d) | LoadError::Invalid(d) | LoadError::MissingFixture(d) => &d.path,
        }
    }

    /// The located problem, for every error except an unreadable file.
    pub fn diagnostic(&self) -> Option<&Diagnostic> {
        match self {
            LoadError::Read { .. } => None,
            LoadError::Parse(d) | LoadError::Invalid(d) | LoadError::MissingFixture(d) => Some(d),
        }
    }

    /// The error on one line (`path:line:column: message`), without the
    /// source excerpt.
    pub fn headline(&self) -> String {
        match self.diagnostic() {
            Some(d) => d.headline(),
            None => self.to_string(),
        }
    }
}

/// Every error from loading a directory of scenarios, one per bad file, so
/// a person fixes them all in one pass instead of one per run.
#[derive(Debug, thiserror::Error)]
pub struct LoadErrors(pub Vec<LoadError>);

impl LoadErrors {
    /// The errors, in file name order.
    pub fn errors(&self) -> &[LoadError] {
        &self.0
    }
}

impl fmt::Display for LoadErrors {
    /// Each error in full, separated by blank lines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n\n")?;
            }
            error.fmt(f)?;
        }
        Ok(())
    }
}

impl IntoIterator for LoadErrors {
    type Item = LoadError;
    type IntoIter = std::vec::IntoIter<LoadError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl From<LoadError> for LoadErrors {
    fn from(error: LoadError) -> Self {
        LoadErrors(vec![error])
    }
}

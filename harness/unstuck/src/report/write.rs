//! Writing report and evidence files, with the path in every error: a
//! report that could not be written is said, never dropped.

use std::{
    io,
    path::{Path, PathBuf},
};

/// A report or evidence file that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("could not write {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("could not write {}: encoding it as JSON failed: {source}", path.display())]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// Writes `text` to `path`, creating its folder.
pub fn text(path: &Path, text: &str) -> Result<(), WriteError> {
    let io = |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(path, text).map_err(io)
}

/// Writes `value` as pretty JSON to `path`, creating its folder.
pub fn json(path: &Path, value: &impl serde::Serialize) -> Result<(), WriteError> {
    let body = serde_json::to_string_pretty(value).map_err(|source| WriteError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    text(path, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_names_the_path() {
        let dir = std::env::temp_dir().join(format!("unstuck-write-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A file where a folder must be: the write cannot succeed.
        let blocker = dir.join("file");
        std::fs::write(&blocker, "x").unwrap();
        let path = blocker.join("report.json");
        let err = json(&path, &serde_json::json!({"a": 1})).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("could not write {}", path.display())),
            "{err}"
        );
        json(&dir.join("ok.json"), &serde_json::json!({"a": 1})).unwrap();
        assert!(
            std::fs::read_to_string(dir.join("ok.json"))
                .unwrap()
                .contains("\"a\": 1")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Reading scenario files.

use std::{
    collections::HashMap,
    fs,
    path::{Path, PathBuf},
};

use serde_saphyr::MessageFormatter;

use super::{
    error::{Diagnostic, LoadError, LoadErrors},
    located::Position,
    model::{Scenario, Source},
    validate,
};
use crate::text::quoted;

/// Reads and validates the scenario in the file at `path`.
///
/// Fixture files are not checked here (the fixtures directory is the
/// runner's business); see [`Scenario::validate_fixtures`].
pub fn load_file(path: &Path) -> Result<Scenario, LoadError> {
    let src = fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    load_str(&src, path)
}

/// Reads and validates a scenario from `src`. `origin` is only used to name
/// the file in errors and in [`Scenario::path`]; it is not read.
pub fn load_str(src: &str, origin: &Path) -> Result<Scenario, LoadError> {
    // Strict booleans: only true/false (and their capitalised forms) are
    // booleans, so `serial: yes` is an error rather than a surprise.
    // Duplicate keys are an error by default; we rely on that.
    if src.lines().all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#') || line == "---"
    }) {
        return Err(LoadError::Parse(Diagnostic::new(
            origin,
            src,
            Position::new(1, 1),
            "the file holds no scenario; expected a mapping with at least name, description and steps",
        )));
    }
    let options = serde_saphyr::options! { strict_booleans: true };
    let mut scenario: Scenario = serde_saphyr::from_str_with_options(src, options)
        .map_err(|e| parse_error(&e, src, origin))?;
    scenario.source = Source {
        path: origin.to_owned(),
        text: src.into(),
    };
    validate::scenario(&mut scenario)
        .map_err(|p| LoadError::Invalid(Diagnostic::new(origin, src, p.position, p.message)))?;
    Ok(scenario)
}

/// Reads every `*.yaml` and `*.yml` file directly in `dir` (not in
/// subdirectories; files whose name starts with `.`, such as editor lock
/// files, are skipped), sorted by file name.
///
/// Returns either every scenario or every error, one per bad file, so all
/// mistakes are reported in one go. Two files declaring the same scenario
/// name is an error on the second: the name identifies a run in reports and
/// namespaces.
pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>, LoadErrors> {
    let read_err = |source| LoadError::Read {
        path: dir.to_owned(),
        source,
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in fs::read_dir(dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let is_yaml = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        );
        if is_yaml && !name.starts_with('.') && path.is_file() {
            files.push(path);
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));

    let mut scenarios = Vec::new();
    let mut errors = Vec::new();
    let mut names: HashMap<String, PathBuf> = HashMap::new();
    for file in files {
        match load_file(&file) {
            Ok(scenario) => {
                if let Some(first) = names.get(scenario.name.as_str()) {
                    errors.push(LoadError::Invalid(Diagnostic::new(
                        &file,
                        &scenario.source.text,
                        scenario.name.position,
                        format!(
                            "scenario name {} is already used by {}",
                            quoted(scenario.name.as_str()),
                            first.display()
                        ),
                    )));
                } else {
                    names.insert(scenario.name.value.clone(), file);
                    scenarios.push(scenario);
                }
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(scenarios)
    } else {
        Err(LoadErrors(errors))
    }
}

/// Turns a serde-saphyr error into our located diagnostic. We take the
/// message from its user-facing formatter (no advice about parser options)
/// and render the location and excerpt ourselves, so parse errors and
/// validation errors look the same.
fn parse_error(error: &serde_saphyr::Error, src: &str, origin: &Path) -> LoadError {
    let inner = error.without_snippet();
    let position = inner
        .location()
        .map(Position::from)
        .unwrap_or(Position::UNKNOWN);
    let message = serde_saphyr::UserMessageFormatter.format_message(inner);
    LoadError::Parse(Diagnostic::new(origin, src, position, message))
}

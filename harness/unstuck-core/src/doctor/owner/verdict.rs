//! The verdict on a finalizer's owner, and how the evidence sources
//! combine into it: `Alive` needs positive evidence; `Unknown` when the
//! owner looks installed but is not shown running, or a source it needs
//! could not be read; `Dead` only when every source was read and none
//! shows the owner, with each check listed. The verdict's types are the
//! model's ([`crate::doctor::model::verdict`]).

use crate::doctor::model::OwnerVerdict;

/// What one evidence source found about one key's owner.
#[derive(Clone, Debug, Default)]
pub(super) struct SourceReport {
    /// Shows the owner running now (`Alive`).
    pub alive: Vec<String>,
    /// Shows the owner installed but not running, or running until a few
    /// minutes ago (`Unknown`).
    pub installed: Vec<String>,
    /// Why the source could not be read, if it could not (`Unknown`).
    pub unreadable: Option<String>,
    /// What was checked, for a `Dead` verdict's evidence.
    pub checked: String,
}

/// Lines a source may contribute before the rest are counted, not quoted.
const MAX_LINES: usize = 6;

fn capped(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = lines.iter().take(MAX_LINES).cloned().collect();
    if lines.len() > MAX_LINES {
        out.push(format!("(and {} more like these)", lines.len() - MAX_LINES));
    }
    out
}

/// Combines the sources: any positive evidence is `Alive`; else anything
/// installed or unreadable is `Unknown`; else `Dead`, listing every check.
pub(super) fn combine(mut preface: Vec<String>, reports: &[SourceReport]) -> OwnerVerdict {
    let alive: Vec<String> = reports.iter().flat_map(|r| capped(&r.alive)).collect();
    let installed: Vec<String> = reports.iter().flat_map(|r| capped(&r.installed)).collect();
    let unreadable: Vec<String> = reports
        .iter()
        .filter_map(|r| r.unreadable.clone())
        .collect();
    if !alive.is_empty() {
        preface.extend(alive);
        preface.extend(installed);
        return OwnerVerdict::Alive { evidence: preface };
    }
    if !installed.is_empty() || !unreadable.is_empty() {
        preface.extend(installed);
        preface.extend(unreadable);
        preface.extend(
            reports
                .iter()
                .filter(|r| r.unreadable.is_none())
                .map(|r| r.checked.clone()),
        );
        return OwnerVerdict::Unknown { evidence: preface };
    }
    preface.extend(reports.iter().map(|r| r.checked.clone()));
    OwnerVerdict::Dead { evidence: preface }
}

/// `--assume-dead KEY`: turns `Unknown` into `Dead` for that exact key,
/// and nothing else (never `Alive`, never another key).
pub(super) fn assume(
    finalizer: &str,
    verdict: OwnerVerdict,
    assume_dead: &[String],
) -> (OwnerVerdict, bool) {
    match verdict {
        OwnerVerdict::Unknown { evidence } if assume_dead.iter().any(|k| k == finalizer) => {
            let mut lines = vec![format!(
                "assumed dead: --assume-dead {finalizer} was given and the evidence alone was Unknown"
            )];
            lines.extend(evidence);
            (OwnerVerdict::Dead { evidence: lines }, true)
        }
        other => (other, false),
    }
}

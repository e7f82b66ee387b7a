//! `unstuck doctor --save-snapshot FILE`: what the doctor saw, made fit to
//! hand to a vendor ([`unstuck::core::doctor::redact`]), in a file only its
//! owner can read, never written over another.

use std::{
    io::Write as _,
    os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _},
    path::Path,
};

use anyhow::{Context, Result};
use unstuck::core::doctor::{Snapshot, redact::redact};

/// Why a snapshot file cannot be written: it is there already (a file, a
/// directory or a link, dangling or not).
pub fn refuse_existing(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Err(exists(path)),
        Err(_) => Ok(()),
    }
}

fn exists(path: &Path) -> String {
    format!(
        "--save-snapshot: {} already exists, and a snapshot is never written over a file; \
         name a new file, or move that one away first",
        path.display()
    )
}

/// Writes the redacted `snapshot` to a new file at `path`, mode 0600.
/// Fails, writing nothing, if anything is at `path` by then.
pub fn write(path: &Path, snapshot: &Snapshot) -> Result<()> {
    let text = serde_json::to_string_pretty(&redact(snapshot))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(exists(path)),
            _ => anyhow::Error::new(e).context(format!("creating {}", path.display())),
        })?;
    // The mode given at creation passes through the umask; a umask that
    // takes the owner's own bits would leave it unreadable, never wider,
    // but say 0600 exactly.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("setting the mode of {}", path.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("unstuck-save-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_new_file_is_private_and_an_existing_one_is_left_alone() {
        let d = dir("modes");
        let path = d.join("snap.json");
        assert!(refuse_existing(&path).is_ok());
        write(&path, &Snapshot::default()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let saved: Snapshot =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(saved, Snapshot::default());

        std::fs::write(&path, "someone's notes").unwrap();
        let refused = refuse_existing(&path).unwrap_err();
        assert!(refused.contains(&path.display().to_string()), "{refused}");
        assert!(refused.contains("move that one away"), "{refused}");
        let err = write(&path, &Snapshot::default()).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "someone's notes");

        // A dangling link is not followed to create its target.
        let link = d.join("link.json");
        std::os::unix::fs::symlink(d.join("target.json"), &link).unwrap();
        assert!(refuse_existing(&link).is_err());
        assert!(write(&link, &Snapshot::default()).is_err());
        assert!(!d.join("target.json").exists());
        std::fs::remove_dir_all(&d).unwrap();
    }
}

//! `unstuck doctor --save-snapshot FILE`: what the doctor saw, made fit to
//! hand to a vendor ([`unstuck::core::doctor::redact`]), in a file only its
//! owner can read, never written over another.

use std::{
    io::Write as _,
    os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
};

use unstuck::core::doctor::{Snapshot, redact::redact};

/// Why a snapshot was not written.
#[derive(Debug, thiserror::Error)]
pub enum SaveSnapshotError {
    /// Something is at the path already (a file, a directory or a link,
    /// dangling or not).
    #[error(
        "--save-snapshot: {} already exists, and a snapshot is never written over a file; \
         name a new file, or move that one away first",
        .0.display()
    )]
    Exists(PathBuf),
    #[error("--save-snapshot: serialising the snapshot: {0}")]
    Serialise(#[from] serde_json::Error),
    #[error("--save-snapshot: {what} {}: {source}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SaveSnapshotError {
    let path = path.to_path_buf();
    move |source| SaveSnapshotError::Io { what, path, source }
}

/// Refuses a path where something is already (a file, a directory or a
/// link, dangling or not).
pub fn refuse_existing(path: &Path) -> Result<(), SaveSnapshotError> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Err(SaveSnapshotError::Exists(path.to_path_buf())),
        // Nothing there (or nothing this user may see): `write` creates it
        // with `create_new`, which refuses whatever this could not see.
        Err(_) => Ok(()),
    }
}

/// Writes the redacted `snapshot` to a new file at `path`, mode 0600.
/// Fails, writing nothing, if anything is at `path` by then.
pub fn write(path: &Path, snapshot: &Snapshot) -> Result<(), SaveSnapshotError> {
    let text = serde_json::to_string_pretty(&redact(snapshot))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => SaveSnapshotError::Exists(path.to_path_buf()),
            _ => io("creating", path)(e),
        })?;
    // The mode given at creation passes through the umask; a umask that
    // takes the owner's own bits would leave it unreadable, never wider,
    // but say 0600 exactly.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(io("setting the mode of", path))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(io("writing", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("unstuck-save-{name}-{}", std::process::id()));
        match std::fs::remove_dir_all(&d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("clearing {}: {e}", d.display()),
        }
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
        let refused = refuse_existing(&path).unwrap_err().to_string();
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

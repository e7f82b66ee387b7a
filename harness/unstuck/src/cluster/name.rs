//! Cluster names, the same rule for every provider: a name becomes a
//! directory, a cgroup, a node name, a Docker container and network.

use super::ClusterError;

/// The longest name [`validate_name`] accepts: a local cluster's links
/// and a kind node's container name are built from it.
pub const MAX_NAME_LEN: usize = 30;

/// Lower-case letters, digits and inner dashes, at most [`MAX_NAME_LEN`].
pub fn validate_name(name: &str) -> Result<(), ClusterError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(ClusterError::InvalidName(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(validate_name("unstuck-test-1").is_ok());
        for bad in ["", "Upper", "-x", "x-", "a/b", "a_b", &"x".repeat(31)] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }
}

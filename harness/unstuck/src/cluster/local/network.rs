//! The links a local cluster creates: a host bridge carrying the node IP
//! (the CNI bridge for pods is made by the bridge plugin itself).

use crate::exec::{Cmd, RunError};

use super::layout::Layout;

/// Creates the host bridge with the node IP; an existing one is reused.
pub async fn create_host_link(ip: &std::path::Path, l: &Layout) -> Result<(), RunError> {
    let link = l.host_link();
    if !link_exists(&link) {
        Cmd::new(ip)
            .args(["link", "add", &link, "type", "bridge"])
            .output()
            .await?;
    }
    let addr = format!("{}/32", l.node_ip());
    let shown = Cmd::new(ip)
        .args(["-4", "addr", "show", "dev", &link])
        .output()
        .await?;
    if !shown.contains(&format!("inet {addr}")) {
        Cmd::new(ip)
            .args(["addr", "add", &addr, "dev", &link])
            .output()
            .await?;
    }
    Cmd::new(ip)
        .args(["link", "set", &link, "up"])
        .output()
        .await?;
    Ok(())
}

pub fn link_exists(name: &str) -> bool {
    std::path::Path::new("/sys/class/net").join(name).exists()
}

/// Links attached to `bridge` (the host ends of pod veths).
pub fn bridge_members(bridge: &str) -> Vec<String> {
    std::fs::read_dir(format!("/sys/class/net/{bridge}/brif"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Deletes a link; one that is already gone is fine, also when it goes
/// between the check and the delete (a pod veth vanishes with its netns).
pub async fn delete_link(ip: &std::path::Path, name: &str) -> Result<(), RunError> {
    if !link_exists(name) {
        return Ok(());
    }
    match Cmd::new(ip).args(["link", "delete", name]).output().await {
        Err(RunError::Failed { output, .. }) if output.contains("Cannot find device") => Ok(()),
        other => other.map(|_| ()),
    }
}

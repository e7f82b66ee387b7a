//! Removing unstuck's containers whose owner died without removing them
//! (SIGKILL, a crash), and listing what a run left.

use super::{
    ContainerError,
    engine::{self, Engine, Listed},
    labels,
};

/// Whether the labels' owner is alive.
fn owned_alive(c: &Listed) -> bool {
    labels::owner_alive(c.label(labels::OWNER_PID), c.label(labels::OWNER_START))
}

/// Removes every unstuck container, then network, whose owning process
/// is gone; what was removed (with the run that made it) or why it could
/// not be.
///
/// One sweep at a time on a machine: two runs that start together would
/// otherwise both list a container and a network, and one would try to
/// remove the network while the other still removes its container ("has
/// active endpoints"). The lock is a `flock`, released when the holder
/// exits, however it exits.
pub async fn sweep_stale() -> Vec<(String, Result<(), ContainerError>)> {
    let lock_path = std::env::temp_dir().join("unstuck-container-sweep.lock");
    let _lock = match tokio::task::spawn_blocking(move || crate::host::lock_file(&lock_path))
        .await
        .expect("the lock task does not panic")
    {
        Ok(lock) => lock,
        Err(source) => {
            return vec![(
                "containers".into(),
                Err(ContainerError::Lock {
                    path: std::env::temp_dir().join("unstuck-container-sweep.lock"),
                    source,
                }),
            )];
        }
    };
    let mut swept = sweep_containers().await;
    swept.extend(sweep_networks().await);
    swept
}

async fn sweep_networks() -> Vec<(String, Result<(), ContainerError>)> {
    let engine = match Engine::connect().await {
        Ok(e) => e,
        Err(e) => return vec![("networks".into(), Err(e))],
    };
    let listed = match engine.networks(labels::MANAGED).await {
        Ok(l) => l,
        Err(e) => return vec![("networks".into(), Err(e))],
    };
    let mut swept = Vec::new();
    for (name, l) in listed {
        let get = |k: &str| l.get(k).map(String::as_str).unwrap_or_default().to_string();
        if labels::owner_alive(&get(labels::OWNER_PID), &get(labels::OWNER_START)) {
            continue;
        }
        // Its owner may have died after the containers were swept (a
        // harness killed while another gc ran): then its container is
        // still attached, and the engine refuses the network ("has active
        // endpoints"). Ours and as stale as the network, it goes first.
        let mut removed = remove_attached(&engine, &name, &mut swept).await;
        if removed.is_ok() {
            removed = engine.remove_network(&name).await;
        }
        swept.push((
            format!("network {name} (run {})", get(labels::RUN)),
            removed,
        ));
    }
    swept
}

/// Removes the stale containers of unstuck's attached to `network`;
/// what was removed goes to `swept`. A container that is not unstuck's,
/// or whose owner runs, is left (and the network's removal then fails).
async fn remove_attached(
    engine: &Engine,
    network: &str,
    swept: &mut Vec<(String, Result<(), ContainerError>)>,
) -> Result<(), ContainerError> {
    let attached = engine.containers(("network", network)).await?;
    for c in attached
        .into_iter()
        .filter(|c| !c.label(labels::RUN).is_empty() && !owned_alive(c))
    {
        let removed = engine.remove_container(&c.id).await;
        swept.push((
            format!("container {} (run {})", c.name, c.label(labels::RUN)),
            removed,
        ));
    }
    Ok(())
}

async fn sweep_containers() -> Vec<(String, Result<(), ContainerError>)> {
    let engine = match Engine::connect().await {
        Ok(e) => e,
        Err(e) => return vec![("containers".into(), Err(e))],
    };
    let listed = match engine.containers(("label", labels::MANAGED)).await {
        Ok(l) => l,
        Err(e) => return vec![("containers".into(), Err(e))],
    };
    let mut swept = Vec::new();
    for c in listed.into_iter().filter(|c| !owned_alive(c)) {
        let removed = engine.remove_container(&c.id).await;
        swept.push((
            format!("container {} (run {})", c.name, c.label(labels::RUN)),
            removed,
        ));
    }
    swept
}

/// The containers and networks of run `run` still on the engine.
pub async fn leftovers(run: &str) -> Result<Vec<String>, ContainerError> {
    let engine = Engine::connect().await?;
    let filter = format!("{}={run}", labels::RUN);
    let mut left: Vec<String> = engine
        .containers(("label", &filter))
        .await?
        .into_iter()
        .map(|c| format!("container {}", c.name))
        .collect();
    left.extend(
        engine
            .networks(&filter)
            .await?
            .into_iter()
            .map(|(n, _)| format!("network {n}")),
    );
    Ok(left)
}

/// `unstuck cluster gc`'s part: sweep, and say what went; whether all
/// that was stale could be removed.
pub async fn gc() -> bool {
    // The local provider needs no Docker: on a machine with no engine
    // (none installed, or none running) unstuck cannot have a container
    // running, and a stopped engine's containers are swept by the first gc
    // once it runs again. Only an engine that is there and fails is an error.
    if let Err(e) = Engine::connect().await
        && engine::is_no_engine(&e)
    {
        println!("no Docker engine on this machine: no containers to sweep ({e})");
        return true;
    }
    let mut all_removed = true;
    for (what, result) in sweep_stale().await {
        match result {
            Ok(()) => println!("removed stale {what}"),
            Err(e) => {
                all_removed = false;
                eprintln!("error: could not remove stale {what}: {e}");
            }
        }
    }
    all_removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use testcontainers::bollard::errors::Error as BollardError;

    #[test]
    fn only_a_missing_engine_is_no_engine() {
        let io = |kind: std::io::ErrorKind| {
            ContainerError::NoEngine(BollardError::IOError { err: kind.into() })
        };
        assert!(engine::is_no_engine(&ContainerError::NoEngine(
            BollardError::SocketNotFoundError("/var/run/docker.sock".into())
        )));
        assert!(engine::is_no_engine(&io(
            std::io::ErrorKind::ConnectionRefused
        )));
        assert!(!engine::is_no_engine(&io(
            std::io::ErrorKind::PermissionDenied
        )));
        assert!(!engine::is_no_engine(&ContainerError::EngineTooOld {
            said: "client version 1.49 is too new. Maximum supported API version is 1.41".into()
        }));
    }
}

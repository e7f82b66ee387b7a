//! Removing unstuck's containers whose owner died without removing them
//! (SIGKILL, a crash), and listing what a run left.

use crate::docker::Docker;

use super::{ContainerError, labels};
use crate::exec::RunError;

/// One container as `docker ps` lists it, with its owner labels.
struct Listed {
    id: String,
    name: String,
    run: String,
    owner_pid: String,
    owner_start: String,
}

async fn list(docker: &Docker, filter: &str) -> Result<Vec<Listed>, ContainerError> {
    let format = format!(
        "{{{{.ID}}}}\t{{{{.Names}}}}\t{{{{.Label \"{}\"}}}}\t{{{{.Label \"{}\"}}}}\t{{{{.Label \"{}\"}}}}",
        labels::RUN,
        labels::OWNER_PID,
        labels::OWNER_START
    );
    let out = docker
        .cmd()
        .args(["ps", "-a", "--no-trunc", "--filter"])
        .arg(filter)
        .arg("--format")
        .arg(format)
        .output()
        .await?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some(Listed {
                id: f.next()?.trim().to_string(),
                name: f.next()?.trim().to_string(),
                run: f.next().unwrap_or_default().trim().to_string(),
                owner_pid: f.next().unwrap_or_default().trim().to_string(),
                owner_start: f.next().unwrap_or_default().trim().to_string(),
            })
        })
        .filter(|c| !c.id.is_empty())
        .collect())
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
    let docker = Docker::default();
    let format = format!(
        "{{{{.Name}}}}\t{{{{.Label \"{}\"}}}}\t{{{{.Label \"{}\"}}}}\t{{{{.Label \"{}\"}}}}",
        labels::RUN,
        labels::OWNER_PID,
        labels::OWNER_START
    );
    let listed = match docker
        .cmd()
        .args(["network", "ls", "--filter"])
        .arg(format!("label={}", labels::MANAGED))
        .arg("--format")
        .arg(format)
        .output()
        .await
    {
        Ok(out) => out,
        Err(e) => return vec![("networks".into(), Err(e.into()))],
    };
    let mut swept = Vec::new();
    for line in listed.lines() {
        let f: Vec<&str> = line.split('\t').map(str::trim).collect();
        let [name, run, pid, start] = f[..] else {
            continue;
        };
        if labels::owner_alive(pid, start) {
            continue;
        }
        // Its owner may have died after the containers were swept (a
        // harness killed while another gc ran): then its container is
        // still attached, and the engine refuses the network ("has active
        // endpoints"). Ours and as stale as the network, it goes first.
        let mut removed = remove_attached(&docker, name, &mut swept).await;
        if removed.is_ok() {
            removed = docker.remove_network(name).await.map_err(Into::into);
        }
        swept.push((format!("network {name} (run {run})"), removed));
    }
    swept
}

/// Removes the stale containers of unstuck's attached to `network`;
/// what was removed goes to `swept`. A container that is not unstuck's,
/// or whose owner runs, is left (and the network's removal then fails).
async fn remove_attached(
    docker: &Docker,
    network: &str,
    swept: &mut Vec<(String, Result<(), ContainerError>)>,
) -> Result<(), ContainerError> {
    let attached = list(docker, &format!("network={network}")).await?;
    for c in attached
        .into_iter()
        .filter(|c| !c.run.is_empty() && !labels::owner_alive(&c.owner_pid, &c.owner_start))
    {
        let removed = docker
            .cmd()
            .args(["rm", "--force", "--volumes", &c.id])
            .output()
            .await
            .map(drop)
            .map_err(Into::into);
        swept.push((format!("container {} (run {})", c.name, c.run), removed));
    }
    Ok(())
}

async fn sweep_containers() -> Vec<(String, Result<(), ContainerError>)> {
    let docker = Docker::default();
    let listed = match list(&docker, &format!("label={}", labels::MANAGED)).await {
        Ok(l) => l,
        Err(e) => return vec![("containers".into(), Err(e))],
    };
    let mut swept = Vec::new();
    for c in listed
        .into_iter()
        .filter(|c| !labels::owner_alive(&c.owner_pid, &c.owner_start))
    {
        let removed = docker
            .cmd()
            .args(["rm", "--force", "--volumes", &c.id])
            .output()
            .await
            .map(drop)
            .map_err(Into::into);
        swept.push((format!("container {} (run {})", c.name, c.run), removed));
    }
    swept
}

/// The containers and networks of run `run` still on the engine.
pub async fn leftovers(run: &str) -> Result<Vec<String>, ContainerError> {
    let docker = Docker::default();
    let filter = format!("label={}={run}", labels::RUN);
    let mut left: Vec<String> = list(&docker, &filter)
        .await?
        .into_iter()
        .map(|c| format!("container {}", c.name))
        .collect();
    let networks = docker
        .cmd()
        .args([
            "network",
            "ls",
            "--filter",
            &filter,
            "--format",
            "{{.Name}}",
        ])
        .output()
        .await?;
    left.extend(
        networks
            .lines()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| format!("network {n}")),
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
    if let Err(e) = Docker::default().engine_answers().await
        && no_engine(&e)
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

/// Whether `docker info` failed because there is no engine to ask: no
/// `docker` program, or nothing listening on its socket.
fn no_engine(e: &RunError) -> bool {
    match e {
        RunError::Spawn { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        RunError::Failed { output, .. } => output.contains("Cannot connect to the Docker daemon"),
        RunError::Timeout { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_missing_engine_is_no_engine() {
        let failed = |output: &str| RunError::Failed {
            command: "docker info".into(),
            status: "exit status: 1".into(),
            output: output.into(),
        };
        assert!(no_engine(&failed(
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
        )));
        assert!(no_engine(&RunError::Spawn {
            command: "docker info".into(),
            hint: String::new(),
            source: std::io::ErrorKind::NotFound.into(),
        }));
        assert!(!no_engine(&failed(
            "permission denied while trying to connect"
        )));
        assert!(!no_engine(&RunError::Timeout {
            command: "docker info".into(),
            timeout: std::time::Duration::from_secs(20),
            output: String::new(),
        }));
    }
}

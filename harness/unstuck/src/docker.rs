//! The few `docker` commands unstuck needs, typed: the kind provider's
//! (its node containers, networks and volumes) and the containers beside
//! a cluster (`containers/`). Every one goes through [`Cmd`], so a failure
//! keeps the pasteable command and its output. It knows no provider: what
//! is kind's (its cluster label) the kind provider passes in.

use std::time::Duration;

use crate::exec::{Cmd, RunError};

/// The `docker` client on PATH.
#[derive(Clone, Debug)]
pub struct Docker {
    program: std::path::PathBuf,
}

impl Default for Docker {
    fn default() -> Self {
        Self {
            program: std::env::var_os("UNSTUCK_DOCKER")
                .map(Into::into)
                .unwrap_or_else(|| "docker".into()),
        }
    }
}

impl Docker {
    pub fn cmd(&self) -> Cmd {
        Cmd::new(&self.program).timeout(Duration::from_secs(60))
    }

    /// Whether the engine answers (`docker info`).
    pub async fn engine_answers(&self) -> Result<(), RunError> {
        self.cmd()
            .args(["info", "--format", "{{.ServerVersion}}"])
            .timeout(Duration::from_secs(20))
            .output()
            .await
            .map(drop)
    }

    /// Whether an image of that exact reference is in the engine.
    pub async fn image_exists(&self, image: &str) -> bool {
        self.cmd()
            .args(["image", "inspect", "--format", "{{.Id}}", image])
            .output()
            .await
            .is_ok()
    }

    /// Names of the containers (running or not) labelled `label=value`.
    pub async fn containers_labelled(
        &self,
        label: &str,
        value: &str,
    ) -> Result<Vec<String>, RunError> {
        Ok(lines(
            &self
                .cmd()
                .args(["ps", "-a", "--format", "{{.Names}}", "--filter"])
                .arg(format!("label={label}={value}"))
                .output()
                .await?,
        ))
    }

    /// The networks a container is attached to, by name (sorted).
    pub async fn container_networks(&self, container: &str) -> Result<Vec<String>, RunError> {
        Ok(lines(
            &self
                .cmd()
                .args([
                    "container",
                    "inspect",
                    "--format",
                    "{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{println}}{{end}}",
                    container,
                ])
                .output()
                .await?,
        ))
    }

    pub async fn network_exists(&self, name: &str) -> Result<bool, RunError> {
        Ok(lines(
            &self
                .cmd()
                .args(["network", "ls", "--format", "{{.Name}}", "--filter"])
                .arg(format!("name=^{name}$"))
                .output()
                .await?,
        )
        .iter()
        .any(|n| n == name))
    }

    /// Removes a network; one already gone is not an error.
    pub async fn remove_network(&self, name: &str) -> Result<(), RunError> {
        if !self.network_exists(name).await? {
            return Ok(());
        }
        self.cmd()
            .args(["network", "rm", name])
            .output()
            .await
            .map(drop)
    }

    /// The named volumes mounted into a container (kind's anonymous
    /// `/var` volume among them), recorded so the leftover check can ask
    /// for exactly those after a delete.
    pub async fn container_volumes(&self, container: &str) -> Result<Vec<String>, RunError> {
        Ok(lines(
            &self
                .cmd()
                .args([
                    "container",
                    "inspect",
                    "--format",
                    "{{range .Mounts}}{{if .Name}}{{.Name}}{{println}}{{end}}{{end}}",
                    container,
                ])
                .output()
                .await?,
        ))
    }

    pub async fn volume_exists(&self, name: &str) -> bool {
        self.cmd()
            .args(["volume", "inspect", "--format", "{{.Name}}", name])
            .output()
            .await
            .is_ok()
    }

    /// `docker exec` of `cmd` in container `container`, privileged as kind
    /// itself runs its node commands, with the command's own deadline,
    /// environment and input.
    pub fn exec(&self, container: &str, cmd: &Cmd) -> Cmd {
        let mut exec = self.cmd().args(["exec", "--privileged"]);
        if let Some(input) = cmd.input() {
            exec = exec.arg("-i").stdin(input.to_vec());
        }
        for (k, v) in cmd.environment() {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            exec = exec.arg("-e").arg(kv);
        }
        exec.arg(container)
            .arg(cmd.program())
            .args(cmd.arguments().iter().cloned())
            // The docker client itself adds a little to the command's time.
            .timeout(cmd.deadline() + Duration::from_secs(5))
    }
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_keeps_the_command_its_environment_input_and_deadline() {
        let inner = Cmd::new("ctr")
            .args(["-n", "k8s.io", "tasks", "ls"])
            .env("A", "b c")
            .stdin("x")
            .timeout(Duration::from_secs(7));
        let outer = Docker::default().exec("n1-control-plane", &inner);
        assert_eq!(
            outer.pretty(),
            "docker exec --privileged -i -e 'A=b c' n1-control-plane ctr -n k8s.io tasks ls"
        );
        assert_eq!(outer.deadline(), Duration::from_secs(12));
        assert_eq!(outer.input(), Some(&b"x"[..]));
    }
}

//! The one place unstuck shells out. Only tools that are themselves the
//! interface go through here (component binaries, `ctr`, `ip`, `kind`,
//! `docker`), and every failure keeps the pasteable command line and what
//! it printed, as kind's `pkg/exec` does with its `RunError`.

use std::{
    ffi::OsString,
    fmt,
    path::PathBuf,
    process::{Output, Stdio},
    time::Duration,
};

/// A failed command: what ran, how it ended and what it said.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The program could not be started at all.
    #[error("failed to start `{command}`: {source}{hint}")]
    Spawn {
        command: String,
        hint: String,
        #[source]
        source: std::io::Error,
    },
    /// The program ran and exited unsuccessfully.
    #[error("`{command}` failed ({status}): {output}")]
    Failed {
        command: String,
        status: String,
        output: String,
    },
    /// The program did not finish before its deadline and was killed.
    #[error(
        "`{command}` did not finish within {timeout} and was killed; output so far: {output}",
        timeout = unstuck_core::duration::Duration::from(*.timeout)
    )]
    Timeout {
        command: String,
        timeout: Duration,
        output: String,
    },
}

/// A command to run, built up like `std::process::Command` but always with
/// a deadline, so that a wedged tool (say `ctr` talking to a stopped shim)
/// can never hang the harness.
#[derive(Clone, Debug)]
pub struct Cmd {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    timeout: Duration,
    stdin: Option<Vec<u8>>,
}

impl Cmd {
    /// A command for `program` with the default 60 s deadline.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            timeout: Duration::from_secs(60),
            stdin: None,
        }
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn stdin(mut self, input: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(input.into());
        self
    }

    /// The program, its arguments and environment as given, for a node
    /// that runs the command elsewhere (`docker exec` into a kind node).
    pub fn program(&self) -> &std::path::Path {
        &self.program
    }

    pub fn arguments(&self) -> &[OsString] {
        &self.args
    }

    pub fn environment(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    pub fn deadline(&self) -> Duration {
        self.timeout
    }

    pub fn input(&self) -> Option<&[u8]> {
        self.stdin.as_deref()
    }

    /// The command line, shell-quoted so it can be pasted into a terminal.
    pub fn pretty(&self) -> String {
        std::iter::once(self.program.as_os_str().to_string_lossy().into_owned())
            .chain(self.args.iter().map(|a| shell_quote(&a.to_string_lossy())))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Runs to completion and returns stdout; any failure is a [`RunError`]
    /// that carries the combined output.
    pub async fn output(&self) -> Result<String, RunError> {
        let out = self.run_raw().await?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(RunError::Failed {
                command: self.pretty(),
                status: out.status.to_string(),
                output: combined(&out),
            })
        }
    }

    /// Runs to completion; success or not is the caller's business.
    pub async fn run_raw(&self) -> Result<Output, RunError> {
        use tokio::io::AsyncWriteExt;
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|source| RunError::Spawn {
            command: self.pretty(),
            hint: missing_program_hint(&self.program, &source),
            source,
        })?;
        if let (Some(input), Some(mut pipe)) = (self.stdin.clone(), child.stdin.take()) {
            // Written concurrently with reading so a chatty child cannot deadlock on a full pipe.
            tokio::spawn(async move {
                let _ = pipe.write_all(&input).await;
            });
        }
        match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(source)) => Err(RunError::Spawn {
                command: self.pretty(),
                hint: String::new(),
                source,
            }),
            // Dropping the future drops the child, which kill_on_drop kills.
            Err(_) => Err(RunError::Timeout {
                command: self.pretty(),
                timeout: self.timeout,
                output: String::new(),
            }),
        }
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.pretty())
    }
}

fn combined(out: &Output) -> String {
    let mut s = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    if !err.trim().is_empty() {
        if !s.is_empty() {
            s.push('\n');
        }
        s.push_str(err.trim_end());
    }
    s
}

fn missing_program_hint(program: &std::path::Path, err: &std::io::Error) -> String {
    if err.kind() == std::io::ErrorKind::NotFound {
        format!(
            " ({} is not installed or not on PATH; ci/setup.sh installs what unstuck needs)",
            program.display()
        )
    } else {
        String::new()
    }
}

/// Quotes one word for a POSIX shell, leaving plain words alone.
pub fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_leaves_plain_words_and_quotes_the_rest() {
        assert_eq!(shell_quote("--data-dir=/var/x"), "--data-dir=/var/x");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[tokio::test]
    async fn a_failing_command_keeps_its_output() {
        let err = Cmd::new("sh")
            .args(["-c", "echo out; echo err >&2; exit 3"])
            .output()
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("out\nerr"), "{text}");
        assert!(text.contains("exit status: 3"), "{text}");
    }

    #[tokio::test]
    async fn a_missing_program_names_the_setup_script() {
        let err = Cmd::new("/nonexistent/unstuck-tool")
            .output()
            .await
            .unwrap_err();
        assert!(err.to_string().contains("ci/setup.sh"), "{err}");
    }

    #[tokio::test]
    async fn a_hanging_command_is_killed_at_its_deadline() {
        let err = Cmd::new("sleep")
            .arg("30")
            .timeout(Duration::from_millis(200))
            .output()
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::Timeout { .. }), "{err}");
    }
}

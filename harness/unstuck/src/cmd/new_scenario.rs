//! `unstuck new-scenario`: a scenario to start from, made from what the
//! doctor saw on a live cluster (`unstuck doctor --save-snapshot`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use unstuck::core::{doctor::Snapshot, scenario::scaffold};

#[derive(Args, Debug)]
pub struct NewScenarioArgs {
    /// The new scenario's name (a DNS label of at most 40 characters); also
    /// the name of its fixtures folder.
    pub name: String,
    /// A snapshot saved by `unstuck doctor --save-snapshot FILE` while the
    /// incident was happening.
    #[arg(long, value_name = "FILE")]
    pub from_snapshot: PathBuf,
    /// Where the scenario file is written.
    #[arg(long, default_value = "scenarios")]
    pub scenarios: PathBuf,
    /// Where its fixtures folder is written.
    #[arg(long, default_value = "fixtures")]
    pub fixtures: PathBuf,
}

pub fn run(args: NewScenarioArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.from_snapshot)
        .with_context(|| format!("reading {}", args.from_snapshot.display()))?;
    let snapshot: Snapshot = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a doctor snapshot (make one with `unstuck doctor --save-snapshot FILE`)",
            args.from_snapshot.display()
        )
    })?;
    let made = scaffold::scaffold(&args.name, &snapshot)?;
    let scenario_path = args.scenarios.join(&made.scenario.0);
    let mut files: Vec<(PathBuf, &str)> = vec![(scenario_path.clone(), &made.scenario.1)];
    for (rel, body) in &made.fixtures {
        files.push((args.fixtures.join(rel), body));
    }
    // Nothing a user has is written over: every target must be new.
    for (path, _) in &files {
        if path.exists() {
            bail!(
                "{} already exists; choose another scenario name or move it away (nothing was written)",
                path.display()
            );
        }
    }
    for (path, body) in &files {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        write_new(path, body)?;
        println!("wrote {}", path.display());
    }
    for note in &made.notes {
        println!("note: {note}");
    }
    println!(
        "next: finish {} (spec, messages, description), then `unstuck scenarios` to check it loads and `unstuck run --filter {}`",
        scenario_path.display(),
        args.name
    );
    Ok(())
}

fn write_new(path: &Path, body: &str) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(body.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

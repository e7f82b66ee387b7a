//! `unstuck report`: working with the reports runs wrote.

use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context, Result};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum ReportCommand {
    /// Merge the reports of several `--shard` jobs into one (report.json,
    /// junit.xml, summary.md), checking that every part is there once.
    Merge {
        /// Run folders (or their report.json files), one per job.
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        /// Where the merged report is written.
        #[arg(long, default_value = "unstuck-merged")]
        out: PathBuf,
    },
    /// A version matrix (with drift) from run folders of different
    /// Kubernetes versions, e.g. one CI job per version, in the order given.
    Matrix {
        /// Run folders (or their report.json files), one per version.
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        /// Where matrix.json, junit.xml and summary.md are written.
        #[arg(long, default_value = "unstuck-matrix")]
        out: PathBuf,
    },
}

pub fn run(command: ReportCommand) -> Result<ExitCode> {
    match command {
        ReportCommand::Matrix { runs, out } => {
            use unstuck::report::{matrix::MatrixReport, merge};
            let runs = runs
                .iter()
                .map(|r| merge::load(r))
                .collect::<Result<Vec<_>, _>>()?;
            let matrix = MatrixReport::new(runs);
            let files = matrix
                .write_all(&out)
                .with_context(|| format!("writing the matrix to {}", out.display()))?;
            Ok(super::show_matrix(&matrix, &files))
        }
        ReportCommand::Merge { runs, out } => {
            use unstuck::report::{RunReport, merge};
            let parts = runs
                .iter()
                .map(|r| merge::load(r))
                .collect::<Result<Vec<_>, _>>()?;
            let merged = RunReport::merge(parts)?;
            let files = merged
                .write_all(&out)
                .with_context(|| format!("writing the merged report to {}", out.display()))?;
            print!("{}", merged.terminal());
            for f in files {
                eprintln!("[unstuck] wrote {}", f.display());
            }
            Ok(if merged.all_passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

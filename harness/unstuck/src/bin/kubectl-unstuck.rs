//! `kubectl unstuck ...`: kubectl runs any executable named
//! `kubectl-<name>` found on PATH as the subcommand `<name>`, passing the
//! remaining arguments. This binary is the `unstuck` command line itself,
//! so `kubectl unstuck doctor -n NS` is `unstuck doctor -n NS`.

#[path = "../main.rs"]
mod unstuck_cli;

fn main() -> std::process::ExitCode {
    unstuck_cli::main()
}

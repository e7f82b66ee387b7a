//! The subcommands that have outgrown main.rs.

pub mod doctor;

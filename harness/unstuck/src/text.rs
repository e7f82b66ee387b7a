//! Lists and names in messages, written for a person reading a report
//! rather than as Rust's `Debug` text. The helpers live in the core, whose
//! findings and plans say names the same way; the harness uses them from
//! here.

pub use unstuck_core::text::{list, or_none, quoted, quoted_list};

//! The labels that say a container is unstuck's, which run made it and
//! which process owns it: what [`super::sweep`] and the leftover checks
//! select on.

use crate::node::ProcRef;

/// On every container unstuck starts.
pub const MANAGED: &str = "dev.unstuck.container";
/// The run (scenario run id) that started it.
pub const RUN: &str = "dev.unstuck.run";
/// The owning process: pid and start time (clock ticks since boot), so a
/// reused pid is not taken for the owner.
pub const OWNER_PID: &str = "dev.unstuck.owner-pid";
pub const OWNER_START: &str = "dev.unstuck.owner-start";

/// The labels for a container of run `run`, owned by this process.
pub fn for_run(run: &str, role: &str) -> Vec<(String, String)> {
    let mut labels = vec![
        (MANAGED.to_string(), role.to_string()),
        (RUN.to_string(), run.to_string()),
    ];
    if let Some(me) = ProcRef::of_pid(std::process::id() as i32) {
        labels.push((OWNER_PID.to_string(), me.pid.to_string()));
        labels.push((OWNER_START.to_string(), me.start_time.to_string()));
    }
    labels
}

/// Whether the owner the labels name is still running; labels that name
/// none (or cannot be read) count as an owner gone.
pub fn owner_alive(pid: &str, start: &str) -> bool {
    match (pid.parse(), start.parse()) {
        (Ok(pid), Ok(start_time)) => ProcRef {
            pid,
            start_time,
            command: String::new(),
        }
        .is_alive(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_owns_its_containers_and_a_made_up_owner_is_gone() {
        let labels = for_run("abc123", "backend");
        let get = |k: &str| labels.iter().find(|(l, _)| l == k).map(|(_, v)| v.clone());
        assert_eq!(get(RUN).as_deref(), Some("abc123"));
        assert!(owner_alive(
            &get(OWNER_PID).unwrap(),
            &get(OWNER_START).unwrap()
        ));
        // Same pid, another start time: a reused pid, not the owner.
        assert!(!owner_alive(&get(OWNER_PID).unwrap(), "1"));
        assert!(!owner_alive("", ""));
    }
}

//! The node doctor on a pod whose process waits in the kernel: facts
//! recorded from a real pod writing to a frozen ext4 filesystem
//! (`tests/recorded/node/frozen-filesystem/`, written by the unstuck
//! crate's `kernel_stall` integration test with
//! `UNSTUCK_RECORD_NODE_FIXTURES`), and variations of them.

mod doctor_support;

use std::path::Path;

use unstuck_core::doctor::{
    PodStuckHint,
    node::{
        DiagnoseNodeOptions, KernelWait, NodeCause, NodeFacts, NodeFinding, NodeRemedy,
        diagnose_pod,
        kernel::{FileArg, parse_stack, parse_syscall, syscall_info},
        plan_node,
    },
};

use doctor_support::node_facts as facts;

fn diagnose(f: &NodeFacts) -> NodeFinding {
    diagnose_pod(f, &DiagnoseNodeOptions::default())
}

fn writer(f: &mut NodeFacts) -> &mut unstuck_core::doctor::node::KernelTask {
    f.processes
        .iter_mut()
        .find(|p| p.command.contains("/data/log"))
        .expect("the recorded writer")
}

#[test]
fn a_writer_on_a_frozen_filesystem_is_a_kernel_stall() {
    let f = facts("frozen-filesystem");
    let finding = diagnose(&f);
    assert!(finding.stuck);
    assert_eq!(finding.causes, vec![NodeCause::KernelStall], "{finding:#?}");
    assert_eq!(finding.hint(), PodStuckHint::RuntimeKill);
    let (task, wait) = &finding.kernel_stalls[0];
    assert_eq!(*wait, KernelWait::FrozenFilesystem);
    assert_eq!(task.path.as_deref(), Some(Path::new("/data/log")));
    assert!(finding.summary.contains("a write to a frozen filesystem"));
    assert!(finding.summary.contains("fsfreeze --unfreeze"));
    let line = finding
        .evidence
        .iter()
        .find(|e| e.starts_with("kernel: "))
        .expect("kernel evidence");
    assert!(
        line.contains("state D (uninterruptible")
            && line.contains("in percpu_rwsem_wait")
            && line.contains("blocked in write on /data/log")
            && line.contains("(ext4 /dev/loop"),
        "{line}"
    );
}

#[test]
fn no_runtime_remedy_is_planned_for_a_kernel_stall() {
    let finding = diagnose(&facts("frozen-filesystem"));
    let plan = plan_node(&finding);
    assert!(
        plan.iter().all(|s| !matches!(
            s.remedy,
            NodeRemedy::RestartRuntime | NodeRemedy::KillShim { .. }
        )),
        "{plan:#?}"
    );
    assert_eq!(
        plan.len(),
        1,
        "only the permission-only force delete: {plan:#?}"
    );
    assert!(plan[0].force);
}

#[test]
fn the_same_pod_without_the_d_state_is_no_kernel_stall() {
    let mut f = facts("frozen-filesystem");
    let w = writer(&mut f);
    w.state = 'S';
    let finding = diagnose(&f);
    assert!(
        !finding.causes.contains(&NodeCause::KernelStall),
        "{finding:#?}"
    );
    assert!(finding.kernel_stalls.is_empty());
}

#[test]
fn a_cgroup_freezer_wait_is_not_a_stall() {
    // A freezer wait is judged from the cgroup's own files (finding
    // CgroupFrozen, tests/node_frozen_cgroup.rs), never as a kernel stall.
    let mut f = facts("frozen-filesystem");
    let w = writer(&mut f);
    w.wchan = Some("__refrigerator".into());
    w.stack = vec!["__refrigerator".into(), "get_signal".into()];
    let finding = diagnose(&f);
    assert!(
        !finding.causes.contains(&NodeCause::KernelStall),
        "{finding:#?}"
    );
}

#[test]
fn other_kernel_waits_are_stalls_without_a_thaw_hint() {
    let mut f = facts("frozen-filesystem");
    let w = writer(&mut f);
    w.wchan = Some("request_wait_answer".into());
    w.stack = vec!["request_wait_answer".into(), "fuse_simple_request".into()];
    let finding = diagnose(&f);
    assert_eq!(finding.causes, vec![NodeCause::KernelStall]);
    assert_eq!(finding.kernel_stalls[0].1, KernelWait::Fuse);
    assert!(!finding.summary.contains("fsfreeze"), "{}", finding.summary);
}

#[test]
fn older_recordings_without_processes_diagnose_as_before() {
    let finding = diagnose(&facts("wedged-shim"));
    assert_eq!(finding.causes, vec![NodeCause::WedgedRuntime]);
    assert!(finding.kernel_stalls.is_empty());
}

#[test]
fn proc_syscall_and_stack_parse() {
    let call = parse_syscall("257 0xffffff9c 0x7ffd5c1e 0x441 0x1b6 0x0 0x0 0x7ffd 0x4bf").unwrap();
    assert_eq!(call.number, 257);
    assert_eq!(call.args[1], 0x7ffd5c1e);
    assert_eq!(syscall_info(257), Some(("openat", Some(FileArg::Path(1)))));
    assert_eq!(syscall_info(1), Some(("write", Some(FileArg::Fd(0)))));
    assert_eq!(parse_syscall("running"), None);
    assert_eq!(parse_syscall("-1 0x7ffd 0x4bf"), None);
    assert_eq!(
        parse_stack("[<0>] percpu_rwsem_wait+0x12f/0x160\n[<0>] vfs_write+0x2b/0x40\n"),
        vec!["percpu_rwsem_wait", "vfs_write"]
    );
}

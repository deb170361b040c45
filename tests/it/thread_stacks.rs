//! Idle memory: no thread stack of the agent can be backed by a transparent huge page.
//! With THP in `always` mode (Debian's default) the kernel backs an anonymous fault with one
//! 2 MiB page whenever the whole 2 MiB-aligned range around it lies inside the mapping. std's
//! default stack (2 MiB, and musl's thread block on top) is such a mapping, and right under
//! the static-pie image (2 MiB aligned) its top is aligned: in the lab's amd64 guest the idle
//! agent's watchdog thread held 2,048 KiB resident for a stack of a few KiB (BENCHMARKS.md
//! "arm64 beside x86_64", idle PSS). A mapping under 2 MiB holds no aligned 2 MiB range.
use crate::common::sandbox::{terminate, wait_for, Sandbox};

/// x86_64's and arm64's (4 KiB granule) PMD page.
const HUGE_PAGE: u64 = 2 * 1024 * 1024;

/// The threads of `pid` other than its main thread: (tid, name).
fn threads(pid: u32) -> Vec<(String, String)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|tid| *tid != pid.to_string())
        .map(|tid| {
            let comm =
                std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default();
            (tid, comm.trim().to_string())
        })
        .collect()
}

/// A thread's stack pointer while it waits in a system call (`/proc/PID/task/TID/syscall`:
/// the call, six arguments, then the stack and program pointers); None while it runs.
fn stack_pointer(pid: u32, tid: &str) -> Option<u64> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")).ok()?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 3 {
        return None;
    }
    let sp = fields[fields.len() - 2];
    u64::from_str_radix(sp.trim_start_matches("0x"), 16).ok()
}

/// The size of the mapping of `pid` that holds `addr`.
fn mapping_size(pid: u32, addr: u64) -> Option<u64> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines().find_map(|l| {
        let (start, end) = l.split_whitespace().next()?.split_once('-')?;
        let (start, end) = (
            u64::from_str_radix(start, 16).ok()?,
            u64::from_str_radix(end, 16).ok()?,
        );
        (start <= addr && addr < end).then_some(end - start)
    })
}

/// The daemon as systemd runs it (the watchdog on: its feeder thread) with a file:// app and
/// svc-server: every thread's stack mapping is smaller than a huge page.
#[test]
fn no_thread_stack_of_the_daemon_can_hold_a_huge_page() {
    let sb = Sandbox::new("thread-stacks");
    sb.file_app();
    sb.install_fake_server();
    // Nobody listens there: the notifications fail quietly, the feeder runs all the same.
    let notify = sb.root.join("no-notify.sock");
    let mut agent = sb.spawn_agent(&[
        ("SVC_AGENT_FAST_START", "1"),
        ("NOTIFY_SOCKET", notify.to_str().unwrap()),
        ("WATCHDOG_USEC", "60000000"),
    ]);
    let pid = agent.id();
    wait_for("the first status", 60, || !sb.status().is_null());
    wait_for("the watchdog's feeder thread", 60, || {
        threads(pid).iter().any(|(_, name)| name == "watchdog")
    });
    // Each thread's stack: found by its stack pointer once it waits in a system call (an
    // idle agent's threads all do; one that ends meanwhile is left out).
    let mut stacks = Vec::new();
    for (tid, name) in threads(pid) {
        let mut sp = None;
        wait_for(
            &format!("thread {name} ({tid}) to wait in a call"),
            60,
            || {
                sp = stack_pointer(pid, &tid);
                sp.is_some() || !std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists()
            },
        );
        if let Some(size) = sp.and_then(|sp| mapping_size(pid, sp)) {
            stacks.push((name, size));
        }
    }
    terminate(&mut agent);
    assert!(
        stacks.iter().any(|(name, _)| name == "watchdog"),
        "the watchdog's stack was found: {stacks:?}"
    );
    let big: Vec<_> = stacks
        .iter()
        .filter(|(_, size)| *size >= HUGE_PAGE)
        .collect();
    assert!(
        big.is_empty(),
        "thread stacks whose mapping can hold a 2 MiB huge page (name, bytes): {big:?}; all: {stacks:?}"
    );
}

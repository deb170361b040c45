//! Starting programs the tests have just written.
#![allow(dead_code)]

use std::process::{Child, Command, Output};
use std::time::Duration;

/// Spawns `cmd`, retrying briefly on "text file busy": a fork in another test thread (its
/// child between fork and exec) can hold the write descriptor of a binary this process has
/// just written, as `process::run` retries in the agent (found by `power_cut_campaign_short`:
/// `AgentUpdate`'s first start failed with ETXTBSY; and on a loaded machine by
/// `update_https::the_executable_of_a_running_process_is_never_removed`).
pub fn spawn(cmd: &mut Command) -> Child {
    retry_busy(cmd, Command::spawn)
}

/// [`spawn`] for a command run to its end.
pub fn output(cmd: &mut Command) -> Output {
    retry_busy(cmd, Command::output)
}

fn retry_busy<T>(cmd: &mut Command, f: fn(&mut Command) -> std::io::Result<T>) -> T {
    let mut tries = 0;
    loop {
        match f(cmd) {
            Ok(c) => return c,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 40 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{}: {e}", cmd.get_program().to_string_lossy()),
        }
    }
}

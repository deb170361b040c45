//! Runs one child (svc-server, or a module) in its own process group: output captured line
//! by line into the log, restarts with exponential backoff, a crash loop reported rather
//! than spun, and a stop that leaves nothing behind (TERM to the group, a bounded wait,
//! KILL). Driven by its owner's loop through [`Supervisor::tick`]; it owns no thread but
//! the two that read the child's output.
use crate::logging::{self, Level};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildSpec {
    /// The name its log lines carry.
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: Env,
}

/// A child's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Env {
    /// Exactly these variables (nothing is inherited).
    Exactly(Vec<(String, String)>),
    /// This process's own environment less the variables named in `remove`, with `set` over
    /// it. std copies the environment once, at the spawn; a whole environment given as
    /// `Exactly` is copied twice more on the way (BENCHMARKS.md, fast start).
    Inherit {
        remove: Vec<std::ffi::OsString>,
        set: Vec<(String, String)>,
    },
}

/// Restart policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Delay before the first restart; doubles with each crash.
    pub first_delay: Duration,
    pub max_delay: Duration,
    /// A run this long resets the backoff.
    pub stable_after: Duration,
    /// `crash_limit` crashes within `crash_window` is a crash loop.
    pub crash_window: Duration,
    pub crash_limit: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            first_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(60),
            stable_after: Duration::from_secs(60),
            crash_window: Duration::from_secs(120),
            crash_limit: 5,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildState {
    NotStarted,
    Running {
        pid: u32,
        since: Instant,
    },
    /// Waiting to restart after a crash.
    Backoff {
        until: Instant,
    },
    /// Too many crashes in a short time: restarts continue at the longest delay.
    CrashLoop {
        until: Instant,
    },
    Stopped,
}

/// What a tick observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildEvent {
    Started {
        pid: u32,
    },
    Exited {
        pid: u32,
        status: String,
        uptime: Duration,
    },
    SpawnFailed(String),
    CrashLoop {
        crashes: usize,
    },
}

pub struct Supervisor {
    spec: ChildSpec,
    policy: Policy,
    child: Option<Child>,
    state: ChildState,
    crashes: VecDeque<Instant>,
    crash_count: u64,
    attempt: u32,
    restarts: u64,
    last_exit: Option<String>,
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown status".into(),
    }
}

fn kill_group(pgid: u32, sig: i32) -> bool {
    // A negative pid signals the group.
    crate::sys::kill(-(pgid as i32), sig)
}

/// Whether any process of the group is still alive (zombies of the group count until their
/// parent reaps them; orphans are reaped by init promptly).
fn group_alive(pgid: u32) -> bool {
    kill_group(pgid, 0)
}

impl Supervisor {
    pub fn new(spec: ChildSpec) -> Supervisor {
        Supervisor::with_policy(spec, Policy::default())
    }

    pub fn with_policy(spec: ChildSpec, policy: Policy) -> Supervisor {
        Supervisor {
            spec,
            policy,
            child: None,
            state: ChildState::NotStarted,
            crashes: VecDeque::new(),
            crash_count: 0,
            attempt: 0,
            restarts: 0,
            last_exit: None,
        }
    }

    pub fn state(&self) -> ChildState {
        self.state
    }

    pub(crate) fn state_name(&self) -> &'static str {
        match self.state {
            ChildState::NotStarted => "not-started",
            ChildState::Running { .. } => "running",
            ChildState::Backoff { .. } => "backoff",
            ChildState::CrashLoop { .. } => "crash-loop",
            ChildState::Stopped => "stopped",
        }
    }

    pub fn pid(&self) -> Option<u32> {
        match self.state {
            ChildState::Running { pid, .. } => Some(pid),
            _ => None,
        }
    }

    /// When the running child started.
    pub(crate) fn since(&self) -> Option<Instant> {
        match self.state {
            ChildState::Running { since, .. } => Some(since),
            _ => None,
        }
    }

    pub(crate) fn uptime(&self) -> Option<Duration> {
        match self.state {
            ChildState::Running { since, .. } => Some(since.elapsed()),
            _ => None,
        }
    }

    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// Exits and failed starts so far; counted when they happen, before any restart.
    pub(crate) fn crashes(&self) -> u64 {
        self.crash_count
    }

    pub fn last_exit(&self) -> Option<&str> {
        self.last_exit.as_deref()
    }

    /// Starts the child now (from any state but running).
    pub fn start(&mut self) -> ChildEvent {
        if let ChildState::Running { pid, .. } = self.state {
            return ChildEvent::Started { pid };
        }
        let mut cmd = Command::new(&self.spec.program);
        match &self.spec.env {
            Env::Exactly(vars) => {
                cmd.env_clear().envs(vars.iter().map(|(k, v)| (k, v)));
            }
            Env::Inherit { remove, set } => {
                for k in remove {
                    cmd.env_remove(k);
                }
                cmd.envs(set.iter().map(|(k, v)| (k, v)));
            }
        }
        cmd.args(&self.spec.args)
            .current_dir(&self.spec.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let now = Instant::now();
        match cmd.spawn() {
            Ok(mut child) => {
                let pid = child.id();
                if let Some(out) = child.stdout.take() {
                    spawn_reader(out, self.spec.name.clone(), Level::Info);
                }
                if let Some(err) = child.stderr.take() {
                    spawn_reader(err, self.spec.name.clone(), Level::Warn);
                }
                self.child = Some(child);
                self.state = ChildState::Running { pid, since: now };
                crate::info!(&self.spec.name, "{} started pid={pid}", self.spec.name);
                ChildEvent::Started { pid }
            }
            Err(e) => {
                let why = format!("cannot start {}: {e}", self.spec.program.display());
                crate::error!(&self.spec.name, "{why}");
                self.schedule_restart(now);
                ChildEvent::SpawnFailed(why)
            }
        }
    }

    /// Records a crash and picks the next start time.
    fn schedule_restart(&mut self, now: Instant) -> Option<ChildEvent> {
        self.crash_count += 1;
        self.crashes.push_back(now);
        while self
            .crashes
            .front()
            .is_some_and(|t| now.duration_since(*t) > self.policy.crash_window)
        {
            self.crashes.pop_front();
        }
        let delay = self
            .policy
            .first_delay
            .saturating_mul(1u32 << self.attempt.min(16))
            .min(self.policy.max_delay);
        self.attempt = self.attempt.saturating_add(1);
        if self.crashes.len() >= self.policy.crash_limit {
            let until = now + self.policy.max_delay;
            let first = !matches!(self.state, ChildState::CrashLoop { .. });
            self.state = ChildState::CrashLoop { until };
            if first {
                crate::error!(
                    &self.spec.name,
                    "{} is in a crash loop: {} crashes within {}s; retrying every {}s",
                    self.spec.name,
                    self.crashes.len(),
                    self.policy.crash_window.as_secs(),
                    self.policy.max_delay.as_secs()
                );
                return Some(ChildEvent::CrashLoop {
                    crashes: self.crashes.len(),
                });
            }
            return None;
        }
        self.state = ChildState::Backoff { until: now + delay };
        crate::info!(
            &self.spec.name,
            "{} restarts in {} ms",
            self.spec.name,
            delay.as_millis()
        );
        None
    }

    /// Notices an exit and restarts when the backoff has passed.
    pub fn tick(&mut self, now: Instant) -> Vec<ChildEvent> {
        let mut events = Vec::new();
        match self.state {
            ChildState::Running { pid, since } => {
                let exited = self
                    .child
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten());
                if let Some(status) = exited {
                    self.child = None;
                    // Grandchildren of a crashed child must not linger.
                    kill_group(pid, libc::SIGKILL);
                    let uptime = now.saturating_duration_since(since);
                    let text = describe(status);
                    crate::warn!(
                        &self.spec.name,
                        "{} stopped pid={pid} ({text}) after {}s",
                        self.spec.name,
                        uptime.as_secs()
                    );
                    self.last_exit = Some(text.clone());
                    events.push(ChildEvent::Exited {
                        pid,
                        status: text,
                        uptime,
                    });
                    if uptime >= self.policy.stable_after {
                        self.attempt = 0;
                    }
                    events.extend(self.schedule_restart(now));
                }
            }
            ChildState::Backoff { until } | ChildState::CrashLoop { until } if now >= until => {
                self.restarts += 1;
                events.push(self.start());
            }
            _ => {}
        }
        events
    }

    /// Sends `sig` to the child process itself (e.g. SIGHUP to reload).
    pub(crate) fn signal(&self, sig: i32) -> bool {
        match self.pid() {
            // A pid we started and have not reaped: not another process.
            Some(pid) => crate::sys::kill(pid as i32, sig),
            None => false,
        }
    }

    /// Stops the child and everything in its process group: SIGTERM, up to `timeout` for
    /// all of them to exit, then SIGKILL. Returns once nothing of the group is left.
    pub fn stop(&mut self, timeout: Duration) {
        let Some(mut child) = self.child.take() else {
            self.state = ChildState::Stopped;
            return;
        };
        let pgid = child.id();
        kill_group(pgid, libc::SIGTERM);
        // TERM, `timeout`, KILL, then at most 5 s for the orphans: a bounded wait for
        // systemd's watchdog (`watchdog`) when the daemon's loop stops svc-server.
        let _wait = crate::watchdog::waiting(timeout + Duration::from_secs(5));
        let deadline = Instant::now() + timeout;
        let mut status = None;
        loop {
            if status.is_none() {
                status = child.try_wait().ok().flatten();
            }
            if status.is_some() && !group_alive(pgid) {
                break;
            }
            if Instant::now() >= deadline {
                crate::warn!(
                    &self.spec.name,
                    "{} did not stop within {:?}: killing its process group",
                    self.spec.name,
                    timeout
                );
                kill_group(pgid, libc::SIGKILL);
                if status.is_none() {
                    status = child.wait().ok();
                }
                // Wait (bounded) for the group's orphans to be reaped by init.
                let end = Instant::now() + Duration::from_secs(5);
                while group_alive(pgid) && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(10));
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let text = status
            .map(describe)
            .unwrap_or_else(|| "unknown status".into());
        crate::info!(
            &self.spec.name,
            "{} stopped pid={pgid} ({text})",
            self.spec.name
        );
        self.last_exit = Some(text);
        self.state = ChildState::Stopped;
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        // Never leave a child behind, even on an unexpected unwind.
        if self.child.is_some() {
            self.stop(Duration::from_secs(5));
        }
    }
}

/// Forwards each line of a child's output to the log, tagged with its name. Lines are
/// bounded so that a child writing without newlines cannot grow our memory.
fn spawn_reader<R: Read + Send + 'static>(stream: R, name: String, level: Level) {
    let spawned = crate::sys::thread(format!("{name}-out"))
        .stack_size(64 * 1024)
        .spawn(move || {
            let mut reader = BufReader::with_capacity(4096, stream);
            let mut line = Vec::with_capacity(256);
            loop {
                line.clear();
                let n = match (&mut reader).take(16 * 1024).read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let text = String::from_utf8_lossy(&line[..n]);
                let text = text.trim_end_matches(['\n', '\r']);
                // A child that writes `<N>` priorities (svc-server does, as our child)
                // keeps its own level.
                match logging::parse_priority(text) {
                    Some((l, msg)) => logging::log(l, &name, msg),
                    None => logging::log(level, &name, text),
                }
            }
        });
    if let Err(e) = spawned {
        crate::error!("supervisor", "cannot start the output reader: {e}");
    }
}

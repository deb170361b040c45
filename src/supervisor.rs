//! TEMPORARY compile stub (not committed).
use std::path::PathBuf;
use std::time::{Duration, Instant};
pub struct ChildSpec {
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
}
pub struct Supervisor {
    spec: ChildSpec,
    child: Option<std::process::Child>,
    since: Option<Instant>,
    restarts: u64,
}
impl Supervisor {
    pub fn new(spec: ChildSpec) -> Self {
        Supervisor {
            spec,
            child: None,
            since: None,
            restarts: 0,
        }
    }
    pub fn start(&mut self) {
        use std::os::unix::process::CommandExt;
        let c = std::process::Command::new(&self.spec.program)
            .args(&self.spec.args)
            .current_dir(&self.spec.cwd)
            .env_clear()
            .envs(self.spec.env.iter().cloned())
            .process_group(0)
            .spawn();
        self.child = c.ok();
        self.since = Some(Instant::now());
    }
    pub fn tick(&mut self, _now: Instant) {
        if let Some(c) = self.child.as_mut() {
            if let Ok(Some(_)) = c.try_wait() {
                self.restarts += 1;
                self.start();
            }
        }
    }
    pub fn stop(&mut self, _t: Duration) {
        if let Some(mut c) = self.child.take() {
            unsafe { libc::kill(-(c.id() as i32), libc::SIGTERM) };
            let _ = c.wait();
        }
    }
    pub fn signal(&self, sig: i32) {
        if let Some(c) = self.child.as_ref() {
            unsafe { libc::kill(c.id() as i32, sig) };
        }
    }
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
    pub fn state_name(&self) -> &'static str {
        if self.child.is_some() {
            "running"
        } else {
            "stopped"
        }
    }
    pub fn restarts(&self) -> u64 {
        self.restarts
    }
    pub fn uptime(&self) -> Option<Duration> {
        self.since.map(|s| s.elapsed())
    }
}

//! Checks of a downloaded binary before it may be activated: an ELF executable for this
//! machine's architecture that answers `version --json` with the right name.
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// ELF `e_machine` of this build's architecture.
pub const fn this_machine() -> u16 {
    if cfg!(target_arch = "aarch64") {
        183
    } else {
        62 // x86_64
    }
}

/// The file is a 64-bit little-endian ELF executable for this machine.
pub fn executable(path: &Path, name: &str) -> Result<(), String> {
    let mut head = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .map_err(|_| format!("the {name} artifact is not an ELF executable (too short)"))?;
    if &head[..4] != b"\x7fELF" {
        return Err(format!("the {name} artifact is not an ELF executable"));
    }
    if head[4] != 2 || head[5] != 1 {
        return Err(format!(
            "the {name} artifact is not a 64-bit little-endian ELF"
        ));
    }
    let e_type = u16::from_le_bytes([head[16], head[17]]);
    let e_machine = u16::from_le_bytes([head[18], head[19]]);
    if e_type != 2 && e_type != 3 {
        return Err(format!(
            "the {name} artifact is not an executable (ELF type {e_type})"
        ));
    }
    if e_machine != this_machine() {
        return Err(format!(
            "the {name} artifact is for another architecture (ELF machine {e_machine}, this machine is {})",
            this_machine()
        ));
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())
}

/// Runs `BINARY version --json` (bounded in time) and returns the version it reports,
/// checking that it calls itself `name`.
pub fn reports_itself(path: &Path, name: &str) -> Result<String, String> {
    let mut child = Command::new(path)
        .args(["version", "--json"])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("the new {name} does not run: {e}"))?;
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the new {name} did not answer `version --json` within 10 s"
                ));
            }
        }
    }
    let mut out = String::new();
    if let Some(o) = child.stdout.take() {
        let _ = o.take(64 * 1024).read_to_string(&mut out);
    }
    let v: serde_json::Value = serde_json::from_str(out.trim()).map_err(|_| {
        format!("the new {name} answered `version --json` with something that is not JSON")
    })?;
    if v["binary_name"] != name {
        return Err(format!(
            "the artifact calls itself {}, not {name}",
            v["binary_name"]
        ));
    }
    v["version"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("the new {name} reports no version"))
}

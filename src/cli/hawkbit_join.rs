//! `svc-agent hawkbit join`: a device joins a hawkBit fleet by one command (issue 46), as an
//! image's first boot, an install script or an operator runs it. It writes the two things
//! the daemon's backend choice reads (docs/hawkbit.md): the token file (0600, atomically,
//! no link followed) and the `agent.svc-agent.hawkbit` section of the cached machine config
//! (merged into what is cached, checked by the one config validator first). Nothing is
//! written when anything is wrong; the token is never printed or logged; a running agent is
//! woken (SIGHUP) and chooses the backend again.
use crate::paths::Paths;
use serde_json::{json, Value};
use std::io::Read;
use std::path::Path;

/// What the command is given.
#[derive(Debug)]
pub(crate) struct Join<'a> {
    pub url: &'a str,
    pub tenant: &'a str,
    /// A literal id, or `@machine-id` / `@hostname`: the rule an image carries, resolved on
    /// the device (each device its own id from one image).
    pub controller_id: &'a str,
    /// `target-token` (default) or `gateway-token`.
    pub auth: &'a str,
    /// The token's file; `-`: standard input (never a command-line argument: argv is
    /// world-readable in /proc).
    pub token_file: &'a str,
    pub auto_confirm: bool,
    /// `hawkbit.board` (the `hw_boardname` sent); `None`: the architecture.
    pub board: Option<&'a str>,
}

/// The controller id `rule` names on this device.
pub(crate) fn controller_id(paths: &Paths, rule: &str) -> Result<String, String> {
    let from_file = |p: &str| -> Result<String, String> {
        let f = paths.device(p);
        let b = crate::fsutil::read_regular(&f, 4096)
            .map_err(|e| format!("--controller-id {rule}: cannot read {}: {e}", f.display()))?;
        let id = String::from_utf8_lossy(&b).trim().to_string();
        if id.is_empty() {
            return Err(format!("--controller-id {rule}: {} is empty", f.display()));
        }
        Ok(id)
    };
    match rule {
        "@machine-id" => from_file("/etc/machine-id"),
        "@hostname" => from_file("/etc/hostname"),
        r if r.starts_with('@') => Err(format!(
            "--controller-id {r}: the rules are @machine-id and @hostname"
        )),
        literal => Ok(literal.to_string()),
    }
}

/// Reads the token (at most 4 KiB; one line of printable ASCII), registered with the log
/// scrubber before any check; no error quotes it.
fn read_token(file: &str) -> Result<String, String> {
    let mut bytes = Vec::new();
    let limit = 4096;
    let read = if file == "-" {
        std::io::stdin().take(limit + 1).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(limit + 1).read_to_end(&mut bytes))
    };
    read.map_err(|e| format!("cannot read the token file {file}: {e}"))?;
    let text = String::from_utf8_lossy(&bytes);
    let token = text.trim();
    if !token.is_empty() {
        crate::logging::register_secret(token);
    }
    if bytes.len() as u64 > limit
        || token.is_empty()
        || !token.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(format!(
            "the token file {file} must hold one token of printable ASCII without spaces, at most {limit} bytes"
        ));
    }
    Ok(token.to_string())
}

/// Joins: checks everything, then writes the token file and the cached config. `Ok`: what
/// was done, for the operator (no secret in it).
pub(crate) fn join(paths: &Paths, j: &Join) -> Result<String, String> {
    let token = read_token(j.token_file)?;
    let controller = controller_id(paths, j.controller_id)?;
    let mut raw = crate::agent::cache::load_config(paths)
        .map(|(_, raw)| raw)
        .unwrap_or_else(|| json!({}));
    if !raw.is_object() {
        raw = json!({});
    }
    let agent = raw
        .as_object_mut()
        .map(|o| o.entry("agent").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
        .ok_or("the cached config's /agent is not an object")?;
    let own = agent
        .entry("svc-agent")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or("the cached config's /agent/svc-agent is not an object")?;
    let mut section = json!({
        "server_url": j.url,
        "tenant": j.tenant,
        "controller_id": controller,
        "auth": j.auth,
        "auto_confirm": j.auto_confirm,
    });
    if let Some(b) = j.board {
        section["board"] = b.into();
    }
    own.insert("hawkbit".into(), section);
    // The one validator: a bad URL, tenant or id is refused here, naming the field.
    let (cfg, _) = crate::config::parse_value(&raw).map_err(|report| {
        let errors: Vec<String> = report.errors.iter().map(|d| d.to_string()).collect();
        format!("not joined: {}", errors.join("; "))
    })?;
    let h = cfg
        .agent
        .agent
        .hawkbit
        .ok_or("not joined: the hawkbit section did not survive validation")?;
    // The token first: a power cut between the two leaves a token no config names yet,
    // never a config whose token is missing.
    let token_path = paths.hawkbit_token();
    if let Some(dir) = token_path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    crate::fsutil::atomic_write(&token_path, format!("{token}\n").as_bytes(), 0o600)
        .map_err(|e| format!("writing {}: {e}", token_path.display()))?;
    std::fs::create_dir_all(paths.state_dir())
        .map_err(|e| format!("creating {}: {e}", paths.state_dir().display()))?;
    crate::agent::cache::save_config(paths, &raw)
        .map_err(|e| format!("writing the cached config: {e}"))?;
    Ok(format!(
        "joined: hawkBit at {} (tenant {}, controller {}, {}); token in {} (0600)",
        h.server_url,
        h.tenant,
        h.controller_id,
        h.auth.scheme(),
        token_path.display()
    ))
}

pub(crate) const HELP: &str = "\
usage: svc-agent hawkbit join --url URL --tenant T --controller-id ID|@machine-id|@hostname
                              --token-file FILE|- [--auth target-token|gateway-token]
                              [--auto-confirm] [--board BOARD] [--root DIR]
  Joins a hawkBit fleet (docs/hawkbit.md): writes the token to /etc/svc-hawkbit.token
  (0600) and the hawkbit section into the cached machine config, after checking both;
  wakes a running agent, which then polls the server. The token comes from a file or
  standard input, never from the command line. --board: the hw_boardname the server
  matches images by (default the architecture; a RAUC machine on gooseBit: its RAUC
  compatible string). Exit 0 joined, 1 refused (nothing written).
";

/// The command's arguments, checked; runs it.
pub(crate) fn run(
    paths: &Paths,
    get: &dyn Fn(&str) -> Option<String>,
    auto_confirm: bool,
) -> Result<String, String> {
    let need = |k: &str| get(k).ok_or_else(|| format!("--{k} is required"));
    let (url, tenant, id, token) = (
        need("url")?,
        need("tenant")?,
        need("controller-id")?,
        need("token-file")?,
    );
    let auth = get("auth").unwrap_or_else(|| "target-token".into());
    if token != "-" && !Path::new(&token).is_file() {
        return Err(format!("the token file {token} is not a file"));
    }
    join(
        paths,
        &Join {
            url: &url,
            tenant: &tenant,
            controller_id: &id,
            auth: &auth,
            token_file: &token,
            auto_confirm,
            board: get("board").as_deref(),
        },
    )
}

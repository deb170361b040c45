//! The DDI documents the agent reads, and the checks that stand between a server's answer and
//! the engine: pure functions over bytes and strings (docs/hawkbit.md lists every resource and
//! field relied on). Anything unexpected is an error naming what and where; nothing here acts.
//! The errors are text on purpose: each is only ever the refusal's wording, recorded in the
//! action record, sent to the server as feedback and carried by `ProtocolError::BadAnswer`
//! (typed there); nothing decides on it.
use crate::protocol::{OsTarget, Target, Targets};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Most bytes a DDI document may have (a deployment of a few chunks is a few KiB); a larger
/// one is refused, never buffered whole.
pub(crate) const MAX_DDI_BYTES: u64 = 256 * 1024;
/// Most chunks (and artifacts per chunk) a deployment may name.
const MAX_CHUNKS: usize = 16;

/// The chunk names the agent acts on, and what each becomes.
pub(crate) const CHUNK_SERVER: &str = "svc-server";
pub(crate) const CHUNK_AGENT: &str = "svc-agent";
/// The machine config: a chunk whose one artifact is the config JSON.
pub(crate) const CHUNK_CONFIG: &str = "svc-config";
/// The name an OS image (a chunk whose artifact is a RAUC bundle) has in the action record.
pub(crate) const CHUNK_OS: &str = "os";

#[derive(Debug, Deserialize, Default)]
struct Link {
    href: String,
}

/// The base resource (`GET {tenant}/controller/v1/{controllerId}`): `config.polling.sleep`
/// and the `_links` to pending work.
#[derive(Debug, Deserialize, Default)]
struct RawBase {
    #[serde(default)]
    config: Option<RawConfig>,
    #[serde(default, rename = "_links")]
    links: BTreeMap<String, Link>,
}

#[derive(Debug, Deserialize, Default)]
struct RawConfig {
    #[serde(default)]
    polling: Option<RawPolling>,
}

#[derive(Debug, Deserialize, Default)]
struct RawPolling {
    #[serde(default)]
    sleep: Option<String>,
}

/// What a poll of the base resource says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Base {
    /// `config.polling.sleep` in seconds; `None` when absent or malformed (with the reason).
    pub sleep_secs: Option<u64>,
    pub sleep_problem: Option<String>,
    /// The `deploymentBase` link, checked to be on the server's own origin.
    pub deployment: Option<String>,
    /// The server asks for the device's attributes (`configData` link).
    pub wants_config_data: bool,
    /// The `cancelAction` link, checked to be on the server's own origin.
    pub cancel: Option<String>,
    /// The `confirmationBase` link (an action waits for consent), on the server's origin.
    pub confirmation: Option<String>,
    /// Links to work this version does not do yet (`cancelAction`, `confirmationBase`,
    /// `installedBase`), by name, for the log.
    pub unsupported: Vec<String>,
}

/// Parses the base resource; every link is checked against `server` (see [`check_link`]).
pub(crate) fn parse_base(body: &[u8], server: &str) -> Result<Base, String> {
    let raw: RawBase = serde_json::from_slice(body)
        .map_err(|e| format!("the base resource is not a DDI controller base: {e}"))?;
    let mut base = Base::default();
    if let Some(s) = raw.config.and_then(|c| c.polling).and_then(|p| p.sleep) {
        match parse_sleep(&s) {
            Ok(secs) => base.sleep_secs = Some(secs),
            Err(e) => base.sleep_problem = Some(e),
        }
    }
    for (name, link) in &raw.links {
        let href = check_link(server, &link.href).map_err(|e| format!("_links/{name}: {e}"))?;
        match name.as_str() {
            "deploymentBase" => base.deployment = Some(href),
            "configData" => base.wants_config_data = true,
            "cancelAction" => base.cancel = Some(href),
            "confirmationBase" => base.confirmation = Some(href),
            other => base.unsupported.push(other.to_string()),
        }
    }
    Ok(base)
}

/// The action id a link names as the segment after `resource/` (`…/confirmationBase/17?c=…`).
pub(crate) fn linked_id(href: &str, resource: &str) -> Option<String> {
    let path = href.split(['?', '#']).next()?;
    let (_, rest) = path.rsplit_once(&format!("/{resource}/"))?;
    let id = rest.split('/').next()?;
    is_segment(id).then(|| id.to_string())
}

/// A `confirmationBase/{actionId}` document: `{"id", "confirmation": {..}}`, the
/// `confirmation` object shaped as a deployment's, checked by the same rules
/// ([`parse_deployment`]); the action must be the one the link named.
pub(crate) fn parse_confirmation(
    body: &[u8],
    server: &str,
    link: &str,
) -> Result<Deployment, String> {
    let mut v: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| format!("the confirmationBase is not JSON: {e}"))?;
    let obj = v
        .as_object_mut()
        .ok_or("the confirmationBase is not a JSON object")?;
    let inner = obj
        .remove("confirmation")
        .ok_or("the confirmationBase has no confirmation object")?;
    obj.insert("deployment".into(), inner);
    let bytes = serde_json::to_vec(&v).map_err(|e| e.to_string())?;
    let d =
        parse_deployment(&bytes, server).map_err(|e| e.replace("deployment", "confirmation"))?;
    match linked_id(link, "confirmationBase") {
        Some(id) if id == d.id => Ok(d),
        named => Err(format!(
            "the confirmationBase link names action {} but its document is action {}; refused",
            named.as_deref().unwrap_or("?"),
            d.id
        )),
    }
}

/// `HH:MM:SS` (hawkBit's `config.polling.sleep`) in seconds.
pub(crate) fn parse_sleep(s: &str) -> Result<u64, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let nums: Option<Vec<u64>> = parts
        .iter()
        .map(|p| {
            (!p.is_empty() && p.len() <= 2 && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        })
        .collect();
    match nums.as_deref() {
        Some([h, m, s]) if *m < 60 && *s < 60 => Ok(h * 3600 + m * 60 + s),
        _ => Err(format!("config.polling.sleep {s:?} is not HH:MM:SS")),
    }
}

/// A link from the server, accepted only on the server's own origin (scheme, host and port):
/// the token goes to that origin alone (`http::Identity`), a link elsewhere would leave the
/// fleet's trust boundary, and one to plain http from an https server is a downgrade.
pub(crate) fn check_link(server: &str, href: &str) -> Result<String, String> {
    if href.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the link has spaces or control characters".into());
    }
    let own = crate::http::origin_of(server);
    if !(href.starts_with("https://") || href.starts_with("http://")) {
        return Err(format!("the link {href:?} is not an http(s) URL"));
    }
    let theirs = crate::http::origin_of(href);
    if own.starts_with("https://") && theirs.starts_with("http://") {
        return Err(format!(
            "the link {href:?} is plain http from an https server; refused"
        ));
    }
    if !theirs.eq_ignore_ascii_case(own) {
        return Err(format!(
            "the link {href:?} points away from the server ({own}); refused"
        ));
    }
    Ok(href.to_string())
}

// ---- deploymentBase -----------------------------------------------------------------------

#[derive(Debug, Deserialize)]
struct RawDeploymentBase {
    id: String,
    deployment: RawDeployment,
}

#[derive(Debug, Deserialize)]
struct RawDeployment {
    #[serde(default)]
    download: Option<String>,
    #[serde(default)]
    update: Option<String>,
    #[serde(default, rename = "maintenanceWindow")]
    maintenance_window: Option<String>,
    #[serde(default)]
    chunks: Vec<RawChunk>,
}

#[derive(Debug, Deserialize)]
struct RawChunk {
    part: String,
    version: String,
    name: String,
    #[serde(default)]
    artifacts: Vec<RawArtifact>,
}

#[derive(Debug, Deserialize)]
struct RawArtifact {
    filename: String,
    #[serde(default)]
    hashes: BTreeMap<String, String>,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default, rename = "_links")]
    links: BTreeMap<String, Link>,
}

/// `download` and `update` of a deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handling {
    Attempt,
    Forced,
    Skip,
}

fn handling(v: Option<&str>, what: &str) -> Result<Handling, String> {
    match v {
        None | Some("attempt") => Ok(Handling::Attempt),
        Some("forced") => Ok(Handling::Forced),
        Some("skip") => Ok(Handling::Skip),
        Some(other) => Err(format!(
            "deployment.{what} {other:?} is not attempt, forced or skip"
        )),
    }
}

/// A deployment the agent can act on: every chunk mapped, every artifact checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Deployment {
    /// The action id, a path segment of the feedback resource (digits and URL-safe text).
    pub id: String,
    pub download: Handling,
    pub update: Handling,
    /// `maintenanceWindow` is `unavailable`: the server asks to wait.
    pub window_closed: bool,
    /// What the engine is asked to bring, in the agent's own protocol's terms.
    pub targets: Targets,
    /// The `svc-config` chunk's artifact (the config JSON), checked like a binary's.
    pub config: Option<Target>,
    /// SWUpdate images (`.swu`) to download and take apart first (`update::swu`); their
    /// files become targets then.
    pub swu: Vec<SwuChunk>,
}

/// A chunk whose one artifact is an SWUpdate image (`*.swu`): whatever its name (gooseBit
/// names a chunk after the file), what it holds is read from its signed `sw-description`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SwuChunk {
    pub version: String,
    pub url: String,
    pub size: u64,
    /// Lowercase hex; at least one. gooseBit gives only sha1.
    pub sha256: Option<String>,
    pub sha1: Option<String>,
}

impl Deployment {
    /// `(name, version)` of each target.
    pub(crate) fn wanted(&self) -> Vec<(String, String)> {
        [
            (CHUNK_AGENT, &self.targets.agent),
            (CHUNK_SERVER, &self.targets.server),
        ]
        .into_iter()
        .filter_map(|(n, t)| t.as_ref().map(|t| (n.to_string(), t.version.clone())))
        .chain((self.targets.os.as_ref()).map(|o| (CHUNK_OS.to_string(), o.target.version.clone())))
        .collect()
    }
}

/// A `cancelAction` document: its own id and the action it stops (`cancelAction.stopId`),
/// both plain path segments.
pub(crate) fn parse_cancel(body: &[u8]) -> Result<(String, String), String> {
    #[derive(Deserialize)]
    struct Cancel {
        id: serde_json::Value,
        #[serde(rename = "cancelAction")]
        cancel: Stop,
    }
    #[derive(Deserialize)]
    struct Stop {
        #[serde(rename = "stopId")]
        stop_id: serde_json::Value,
    }
    let c: Cancel = serde_json::from_slice(body)
        .map_err(|e| format!("the cancelAction is not a DDI cancel action: {e}"))?;
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match (text(&c.id), text(&c.cancel.stop_id)) {
        (Some(id), Some(stop)) if is_segment(&id) && is_segment(&stop) => Ok((id, stop)),
        _ => Err("the cancelAction's id or stopId is not a plain path segment".into()),
    }
}

/// The action id of a deployment document, if it has one that can be trusted as a path
/// segment, for a failure feedback about a document that is otherwise unusable.
pub(crate) fn action_id(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct IdOnly {
        id: serde_json::Value,
    }
    let v: IdOnly = serde_json::from_slice(body).ok()?;
    let id = match v.id {
        serde_json::Value::String(s) => s,
        serde_json::Value::Number(n) => n.to_string(),
        _ => return None,
    };
    is_segment(&id).then_some(id)
}

fn is_segment(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

/// Parses and checks a `deploymentBase` document: chunk names it knows (`svc-server`,
/// `svc-agent`), one artifact each with a sha256 of 64 hex digits and a size, a version the
/// engine accepts, a download link on the server's origin. Any problem refuses the whole
/// deployment, so nothing of it is half applied.
pub(crate) fn parse_deployment(body: &[u8], server: &str) -> Result<Deployment, String> {
    // The id may be a number in some servers' answers: read it leniently, then strictly.
    let id = action_id(body);
    let mut value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("the deployment is not JSON: {e}"))?;
    if let (Some(id), Some(obj)) = (&id, value.as_object_mut()) {
        obj.insert("id".into(), serde_json::Value::String(id.clone()));
    }
    let raw: RawDeploymentBase = serde_json::from_value(value)
        .map_err(|e| format!("the deployment is not a DDI deploymentBase: {e}"))?;
    let id = id.ok_or_else(|| format!("action id {:?} is not a path segment", raw.id))?;
    let d = raw.deployment;
    let download = handling(d.download.as_deref(), "download")?;
    let update = handling(d.update.as_deref(), "update")?;
    let window_closed = match d.maintenance_window.as_deref() {
        None | Some("available") => false,
        Some("unavailable") => true,
        Some(other) => {
            return Err(format!(
                "deployment.maintenanceWindow {other:?} is not available or unavailable"
            ))
        }
    };
    if d.chunks.is_empty() {
        return Err("the deployment has no chunks".into());
    }
    if d.chunks.len() > MAX_CHUNKS {
        return Err(format!(
            "the deployment has {} chunks (at most {MAX_CHUNKS})",
            d.chunks.len()
        ));
    }
    let mut targets = Targets::default();
    let mut config = None;
    let mut swu = Vec::new();
    for (i, c) in d.chunks.iter().enumerate() {
        let at = format!(
            "deployment.chunks[{i}] (part {:?}, name {:?})",
            c.part, c.name
        );
        if let [a] = c.artifacts.as_slice() {
            // A RAUC bundle (whatever the chunk's name: gooseBit names it after the file):
            // the OS image, for the OS engine (`osimage`), which RAUC's keyring vouches for.
            if a.filename.ends_with(".raucb") {
                check_version(&c.version).map_err(|e| format!("{at}: {e}"))?;
                if targets.os.is_some() {
                    return Err(format!("{at}: a second RAUC bundle in the deployment"));
                }
                let b = swu_chunk(a, &c.version, server).map_err(|e| format!("{at}: {e}"))?;
                targets.os = Some(OsTarget {
                    target: Target {
                        version: b.version,
                        url: b.url,
                        sha256: b.sha256,
                        size: Some(b.size),
                        signature: None,
                        deltas: Vec::new(),
                    },
                    format: crate::osimage::FORMAT_RAUC.into(),
                    sha1: b.sha1,
                });
                continue;
            }
            if a.filename.ends_with(".swu") {
                check_version(&c.version).map_err(|e| format!("{at}: {e}"))?;
                swu.push(swu_chunk(a, &c.version, server).map_err(|e| format!("{at}: {e}"))?);
                continue;
            }
        }
        let slot = match c.name.as_str() {
            CHUNK_SERVER => &mut targets.server,
            CHUNK_AGENT => &mut targets.agent,
            CHUNK_CONFIG => &mut config,
            _ => {
                return Err(format!(
                    "{at}: unknown chunk; this agent takes {CHUNK_SERVER:?}, {CHUNK_AGENT:?} and {CHUNK_CONFIG:?}"
                ))
            }
        };
        if slot.is_some() {
            return Err(format!("{at}: a second chunk of that name"));
        }
        check_version(&c.version).map_err(|e| format!("{at}: {e}"))?;
        let [a] = c.artifacts.as_slice() else {
            return Err(format!(
                "{at}: {} artifacts; a binary chunk has exactly one",
                c.artifacts.len()
            ));
        };
        *slot = Some(target(a, &c.version, server).map_err(|e| format!("{at}: {e}"))?);
    }
    Ok(Deployment {
        id,
        download,
        update,
        window_closed,
        targets,
        config,
        swu,
    })
}

fn check_version(v: &str) -> Result<(), String> {
    if v.is_empty()
        || v.len() > 64
        || !v
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
    {
        return Err(format!(
            "version {v:?} is empty or has characters outside [A-Za-z0-9._+-]"
        ));
    }
    Ok(())
}

/// A hash of `len` hex digits from the artifact, if it names one under `name`.
fn hash_of(a: &RawArtifact, name: &str, len: usize) -> Result<Option<String>, String> {
    match a.hashes.get(name) {
        None => Ok(None),
        Some(h) if h.len() == len && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(Some(h.to_ascii_lowercase()))
        }
        Some(h) => Err(format!(
            "artifact {:?}: {name} {h:?} is not {len} hex digits",
            a.filename
        )),
    }
}

/// An SWUpdate image (or a RAUC bundle: the same checks): size, a download link as for any
/// artifact, and a sha256 or (all gooseBit gives) a sha1 of the archive, which only checks
/// the transfer: trust comes from the sha256s and the vendor signatures in its
/// `sw-description` (a bundle's: from RAUC's keyring).
fn swu_chunk(a: &RawArtifact, version: &str, server: &str) -> Result<SwuChunk, String> {
    let sha256 = hash_of(a, "sha256", 64)?;
    // The sha1 only when there is no sha256 (the stronger one decides; the other is unread).
    let sha1 = match sha256 {
        Some(_) => None,
        None => hash_of(a, "sha1", 40)?,
    };
    if sha256.is_none() && sha1.is_none() {
        return Err(format!(
            "artifact {:?} has no sha256 or sha1 hash",
            a.filename
        ));
    }
    let t = target_link(a, version, server)?;
    Ok(SwuChunk {
        version: version.to_string(),
        url: t.url,
        size: t.size.unwrap_or_default(),
        sha256,
        sha1,
    })
}

fn target(a: &RawArtifact, version: &str, server: &str) -> Result<Target, String> {
    let file = &a.filename;
    let sha = a
        .hashes
        .get("sha256")
        .ok_or_else(|| format!("artifact {file:?} has no sha256 hash"))?
        .to_ascii_lowercase();
    if !crate::encoding::is_sha256_hex(&sha) {
        return Err(format!(
            "artifact {file:?}: sha256 {sha:?} is not 64 hex digits"
        ));
    }
    Ok(Target {
        sha256: Some(sha),
        ..target_link(a, version, server)?
    })
}

/// Size and download link of an artifact (the sha256 is the caller's).
fn target_link(a: &RawArtifact, version: &str, server: &str) -> Result<Target, String> {
    let file = &a.filename;
    let size = a
        .size
        .filter(|s| *s > 0)
        .ok_or_else(|| format!("artifact {file:?} has no size"))?;
    // The https link when the server is https; `download-http` only from a plain server.
    let names: &[&str] = if server.starts_with("https://") {
        &["download"]
    } else {
        &["download-http", "download"]
    };
    let href = names
        .iter()
        .find_map(|n| a.links.get(*n))
        .ok_or_else(|| format!("artifact {file:?} has no download link"))?;
    let url = check_link(server, &href.href).map_err(|e| format!("artifact {file:?}: {e}"))?;
    Ok(Target {
        version: version.to_string(),
        url,
        sha256: None,
        size: Some(size),
        signature: None,
        deltas: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = "https://hb.example:8443/p";

    fn deployment(chunks: &str) -> Vec<u8> {
        format!(r#"{{"id": "7", "deployment": {{"download": "forced", "update": "attempt", "chunks": {chunks}}}}}"#).into_bytes()
    }

    fn chunk(name: &str, sha: &str, href: &str) -> String {
        format!(
            r#"{{"part": "bApp", "version": "2.0.0", "name": "{name}", "artifacts": [{{"filename": "f", "size": 10, "hashes": {{"sha1": "x", "sha256": "{sha}"}}, "_links": {{"download": {{"href": "{href}"}}}}}}]}}"#
        )
    }

    const SHA: &str = "AB00000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn sleep_is_hh_mm_ss() {
        assert_eq!(parse_sleep("00:05:00"), Ok(300));
        assert_eq!(parse_sleep("12:00:01"), Ok(43201));
        for bad in [
            "5:00",
            "00:60:00",
            "aa:00:00",
            "",
            "00:00:00:00",
            "+1:00:00",
        ] {
            assert!(parse_sleep(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn links_stay_on_the_servers_origin() {
        assert!(check_link(S, "https://hb.example:8443/p/DEFAULT/x").is_ok());
        assert!(check_link(S, "https://HB.example:8443/y").is_ok());
        let other = check_link(S, "https://evil.example/x").unwrap_err();
        assert!(other.contains("points away"), "{other}");
        let plain = check_link(S, "http://hb.example:8443/x").unwrap_err();
        assert!(plain.contains("plain http"), "{plain}");
        assert!(check_link(S, "https://hb.example/x").is_err(), "other port");
        assert!(check_link(S, "file:///etc/shadow").is_err());
        assert!(check_link(S, "https://hb.example:8443@evil/x").is_err());
    }

    #[test]
    fn base_resource_gives_sleep_and_deployment() {
        let b = parse_base(
            br#"{"config": {"polling": {"sleep": "00:00:30"}}, "_links": {"deploymentBase": {"href": "https://hb.example:8443/p/T/controller/v1/d/deploymentBase/7?c=1"}, "configData": {"href": "https://hb.example:8443/p/T/controller/v1/d/configData"}}}"#,
            S,
        )
        .unwrap();
        assert_eq!(b.sleep_secs, Some(30));
        assert!(b.deployment.unwrap().ends_with("deploymentBase/7?c=1"));
        assert!(b.wants_config_data && b.unsupported.is_empty());
        let e = parse_base(
            br#"{"_links": {"deploymentBase": {"href": "https://evil/x"}}}"#,
            S,
        )
        .unwrap_err();
        assert!(e.contains("_links/deploymentBase"), "{e}");
        assert!(parse_base(b"[1]", S).is_err());
    }

    #[test]
    fn a_good_deployment_maps_to_targets() {
        let body = deployment(&format!(
            "[{}]",
            chunk("svc-server", SHA, "https://hb.example:8443/a/f")
        ));
        let d = parse_deployment(&body, S).unwrap();
        assert_eq!(d.id, "7");
        assert_eq!(d.download, Handling::Forced);
        let t = d.targets.server.unwrap();
        assert_eq!(t.sha256.unwrap(), SHA.to_ascii_lowercase());
        assert_eq!(t.size, Some(10));
        assert!(d.targets.agent.is_none());
    }

    /// gooseBit's chunk for a RAUC upload: named after the file, only sha1. It becomes the
    /// OS target, checked as strictly as any artifact; a second bundle is refused whole.
    #[test]
    fn a_rauc_bundle_chunk_is_the_os_target() {
        let c = r#"{"part": "os", "version": "2.0.0", "name": "lab-2.0.raucb", "artifacts": [{"filename": "lab-2.0.raucb", "size": 4096, "hashes": {"sha1": "AA00000000000000000000000000000000000000"}, "_links": {"download": {"href": "https://hb.example:8443/d/download"}}}]}"#;
        let d = parse_deployment(&deployment(&format!("[{c}]")), S).unwrap();
        let os = d.targets.os.as_ref().unwrap();
        assert_eq!(os.format, crate::osimage::FORMAT_RAUC);
        assert_eq!(os.target.size, Some(4096));
        assert_eq!(os.target.sha256, None);
        assert_eq!(
            os.sha1.as_deref(),
            Some("aa00000000000000000000000000000000000000")
        );
        assert_eq!(d.wanted(), vec![("os".to_string(), "2.0.0".to_string())]);
        assert!(d.swu.is_empty());
        for (bad, why) in [
            (format!("[{c}, {c}]"), "a second RAUC bundle"),
            (
                format!("[{}]", c.replace("\"size\": 4096", "\"size\": 0")),
                "no size",
            ),
            (
                format!(
                    "[{}]",
                    c.replace("https://hb.example:8443", "https://evil.example")
                ),
                "points away",
            ),
            (
                format!("[{}]", c.replace("\"sha1\"", "\"md5\"")),
                "no sha256 or sha1",
            ),
        ] {
            let e = parse_deployment(&deployment(&bad), S).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn swu_chunks_take_a_sha1_and_any_name() {
        // gooseBit's shape: the chunk is named after the file, only sha1.
        let c = r#"{"part": "os", "version": "2.0.0", "name": "svc-server-2.0.0.swu", "artifacts": [{"filename": "svc-server-2.0.0.swu", "size": 4096, "hashes": {"sha1": "AA00000000000000000000000000000000000000"}, "_links": {"download": {"href": "https://hb.example:8443/d/download"}}}]}"#;
        let d = parse_deployment(&deployment(&format!("[{c}]")), S).unwrap();
        assert!(d.targets.server.is_none() && d.wanted().is_empty());
        assert_eq!(d.swu.len(), 1);
        assert_eq!(
            d.swu[0].sha1.as_deref(),
            Some("aa00000000000000000000000000000000000000")
        );
        assert_eq!(d.swu[0].size, 4096);
        for (bad, why) in [
            (c.replace("\"sha1\"", "\"md5\""), "no sha256 or sha1"),
            (c.replace("AA000", "ZZ000"), "not 40 hex"),
            (
                c.replace("https://hb.example:8443", "https://evil.example"),
                "points away",
            ),
            (
                c.replace("\"version\": \"2.0.0\"", "\"version\": \"../2\""),
                "version",
            ),
        ] {
            let e = parse_deployment(&deployment(&format!("[{bad}]")), S).unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
    }

    #[test]
    fn hostile_deployments_are_refused_whole() {
        let good = chunk("svc-server", SHA, "https://hb.example:8443/a/f");
        let cases = [
            (
                format!(
                    "[{good}, {}]",
                    chunk("kernel", SHA, "https://hb.example:8443/k")
                ),
                "unknown chunk",
            ),
            (
                format!(
                    "[{}]",
                    chunk("svc-server", "abc", "https://hb.example:8443/a")
                ),
                "not 64 hex",
            ),
            (
                format!("[{}]", chunk("svc-server", SHA, "https://cdn.example/a")),
                "points away",
            ),
            (
                format!("[{}]", chunk("svc-server", SHA, "http://hb.example:8443/a")),
                "plain http",
            ),
            (format!("[{good}, {good}]"), "second chunk"),
            ("[]".to_string(), "no chunks"),
        ];
        for (chunks, why) in cases {
            let e = parse_deployment(&deployment(&chunks), S).unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
        let e =
            parse_deployment(br#"{"id": "../x", "deployment": {"chunks": []}}"#, S).unwrap_err();
        assert!(e.contains("path segment"), "{e}");
        assert_eq!(action_id(br#"{"id": 12}"#), Some("12".into()));
        assert_eq!(
            parse_cancel(br#"{"id": "9", "cancelAction": {"stopId": 7}}"#),
            Ok(("9".into(), "7".into()))
        );
        assert!(parse_cancel(br#"{"id": "9", "cancelAction": {"stopId": "../7"}}"#).is_err());
        assert_eq!(action_id(br#"{"id": "a/b"}"#), None);
    }
}

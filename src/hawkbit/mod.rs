//! The Eclipse hawkBit backend (docs/hawkbit.md): the agent speaks hawkBit's DDI API as a
//! second implementation of [`protocol::Transport`], so the daemon loop, the poll schedule
//! (`protocol::backoff`, one retry rule), the update engine (`update`: the verified,
//! resumable download, activation, probation, rollback) and the one HTTP client
//! (`http`: deadline, caps, no redirects on control requests, TLS verified) serve both
//! backends. This module only translates:
//!
//! - a poll is `GET {server}/{tenant}/controller/v1/{controllerId}` with `If-None-Match`;
//!   `config.polling.sleep` becomes the poll interval; 429 and 5xx are retried by the agent's
//!   rule (a `Retry-After` honoured as a floor);
//! - a `deploymentBase` link is fetched and checked whole (`ddi`); its chunks become the
//!   engine's targets, with the deployment's sha256 and size;
//! - feedback is derived from the engine's version records by one rule (`action::due`) and
//!   sent before each poll: `proceeding`, `downloaded`, and `closed` + `success` only once
//!   probation has passed, `failure` with the reason after a rollback or a refused deployment.
pub(crate) mod action;
pub mod consent;
pub(crate) mod ddi;
mod error;

pub use error::HawkbitError;

use crate::config::model::HawkbitSettings;
use crate::http;
use crate::paths::Paths;
use crate::protocol::https::{exchange_capped, header, http_error, timeout_secs};
use crate::protocol::{PollAnswer, PollOutcome, ProtocolError, Transport};
use crate::update::swu::SwuOffer;
use crate::update::{DownloadOptions, StateLock, VersionRecords};
use action::{ActionRecord, Feedback, Stage};
use serde_json::Value;
use std::path::Path;

pub(crate) const SUB: &str = "hawkbit";
/// Most bytes of the token file.
const MAX_TOKEN_BYTES: u64 = 4096;

/// Reads the DDI token (`Paths::hawkbit_token`): one line of printable ASCII. A file others
/// may read is made 0600 first; the token is registered with the log scrubber before any
/// check, and no error quotes it.
pub(crate) fn load_token(paths: &Paths) -> Result<String, HawkbitError> {
    use std::io::Read;
    let p = paths.hawkbit_token();
    let mut bytes = Vec::new();
    std::fs::File::open(&p)
        .and_then(|f| f.take(MAX_TOKEN_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| {
            HawkbitError::Token(format!(
                "cannot read the hawkBit token file {}: {e}",
                p.display()
            ))
        })?;
    crate::credentials::tighten_mode(&p);
    let text = String::from_utf8_lossy(&bytes);
    let token = text.trim();
    if !token.is_empty() {
        crate::logging::register_secret(token);
    }
    if bytes.len() as u64 > MAX_TOKEN_BYTES {
        return Err(HawkbitError::Token(format!(
            "the hawkBit token file {} is larger than {MAX_TOKEN_BYTES} bytes",
            p.display()
        )));
    }
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(HawkbitError::Token(format!(
            "the hawkBit token file {} must hold one token of printable ASCII without spaces",
            p.display()
        )));
    }
    Ok(token.to_string())
}

/// What `svc-agent doctor` asks the hawkBit server: one `GET` of the controller's base with
/// the token (nothing sent, nothing acted on). `Ok`: what the server said, for the check's
/// line; `Err`: why it is no good, the token never quoted.
pub(crate) fn probe(paths: &Paths, settings: &HawkbitSettings) -> Result<String, String> {
    let t = HawkbitTransport::connect(paths, settings).map_err(|e| e.to_string())?;
    let a = exchange_capped(t.get(&t.base), ddi::MAX_DDI_BYTES)
        .map_err(|e| format!("{}: {e}", t.base))?;
    match a.status {
        200 => {}
        401 | 403 => {
            return Err(format!(
                "{} refused the token (HTTP {}): check {} and `auth` ({})",
                t.server,
                a.status,
                paths.hawkbit_token().display(),
                settings.auth.scheme()
            ))
        }
        s => return Err(format!("{} answered HTTP {s}", t.base)),
    }
    let base = ddi::parse_base(&a.body, &t.server)?;
    Ok(format!(
        "{} knows controller {} of tenant {} (poll every {})",
        t.server,
        settings.controller_id,
        settings.tenant,
        base.sleep_secs
            .map(|s| format!("{s} s"))
            .unwrap_or_else(|| "? s".into())
    ))
}

/// The DDI client of one controller.
pub struct HawkbitTransport {
    paths: Paths,
    server: String,
    /// `{server}/{tenant}/controller/v1/{controllerId}`.
    base: String,
    identity: http::Identity,
    /// Consent is given without asking (`auto_confirm`).
    auto_confirm: bool,
    /// `configData`'s `hw_boardname` (`board`, else the architecture).
    board: String,
    last_bytes: (u64, u64),
    /// An action was closed by this poll's feedback: its offer in the same answer is the
    /// server not caught up yet, not an offer again.
    closed_now: bool,
    /// The engine's download settings for SWUpdate images (`update::swu`).
    download: DownloadOptions,
    /// The action and the end of the byte budget's wait the server was told of last, so
    /// that a wait is told once, not at every poll.
    budget_told: Option<(String, u64)>,
    /// An image waits for the byte budget: the base is read whole at each poll (no ETag),
    /// so that its deployment is read, and the budget asked, again.
    swu_waits: bool,
    /// This poll's deployment read answered 404/410: its answer goes without the base's
    /// ETag, so that the next poll reads the base and the deployment again.
    deployment_gone: bool,
}

impl std::fmt::Debug for HawkbitTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HawkbitTransport({})", self.base)
    }
}

impl HawkbitTransport {
    /// The backend for `settings`, with the token from its file.
    pub fn connect(paths: &Paths, settings: &HawkbitSettings) -> Result<Self, ProtocolError> {
        let token = load_token(paths).map_err(|e| ProtocolError::Setup(e.to_string()))?;
        Ok(Self::with_token(paths, settings, &token))
    }

    fn with_token(paths: &Paths, settings: &HawkbitSettings, token: &str) -> Self {
        let server = settings.server_url.trim_end_matches('/').to_string();
        let base = format!(
            "{server}/{}/controller/v1/{}",
            settings.tenant, settings.controller_id
        );
        let scheme = settings.auth.scheme();
        let identity = http::Identity {
            origin: http::origin_of(&server).to_string(),
            headers: vec![("Authorization", format!("{scheme} {token}"))],
        };
        HawkbitTransport {
            paths: paths.clone(),
            server,
            base,
            identity,
            auto_confirm: settings.auto_confirm,
            board: settings
                .board
                .clone()
                .unwrap_or_else(|| crate::update::this_target().to_string()),
            last_bytes: (0, 0),
            closed_now: false,
            download: DownloadOptions::default(),
            budget_told: None,
            swu_waits: false,
            deployment_gone: false,
        }
    }

    /// The engine's download settings (deadline, attempts, backoff) for the SWUpdate images
    /// this transport takes apart: the daemon's own, so both backends download alike.
    pub fn with_download_options(mut self, opts: DownloadOptions) -> Self {
        self.download = opts;
        self
    }

    /// The token header for the server's origin, for the engine's artifact downloads (hawkBit
    /// serves artifacts to the same authentication as the DDI resources; the engine sends it
    /// to that origin only).
    pub fn identity(&self) -> http::Identity {
        self.identity.clone()
    }

    /// The server's URL (`server_url` without a trailing `/`): the engine's base for the
    /// scheme rule (an https server's artifacts are https).
    pub fn server_url(&self) -> String {
        self.server.clone()
    }

    /// A GET of one of the server's own resources: the token on it, JSON asked for, and by
    /// the control-request policy no redirect followed.
    fn get(&self, url: &str) -> http::Request {
        http::get(url, timeout_secs())
            .header("Accept", "application/hal+json, application/json")
            .identity(Some(self.identity.clone()))
    }

    /// Sends `doc` as JSON to one of the server's own resources (`POST`, or `PUT` with
    /// `put`), with the token, and counts the bytes both ways. The caller judges the status.
    fn send_json(
        &mut self,
        put: bool,
        url: &str,
        doc: &Value,
    ) -> Result<crate::protocol::https::Answer, ProtocolError> {
        let body = serde_json::to_vec(doc).unwrap_or_default();
        self.last_bytes.0 += body.len() as u64;
        let req = if put {
            http::put(url, body, timeout_secs())
        } else {
            http::post(url, body, timeout_secs())
        }
        .header("Content-Type", "application/json")
        .identity(Some(self.identity.clone()));
        let a = exchange_capped(req, ddi::MAX_DDI_BYTES)?;
        self.last_bytes.1 += a.body.len() as u64;
        Ok(a)
    }

    /// Sends `fb` for action `id`. A 404 or 410 means the server has dropped the action
    /// (cancelled, or closed already): nothing more to tell.
    fn send_feedback(&mut self, id: &str, fb: &Feedback) -> Result<(), ProtocolError> {
        let url = format!("{}/deploymentBase/{id}/feedback", self.base);
        let a = self.send_json(false, &url, &fb.document(id))?;
        match a.status {
            200..=299 | 404 | 410 => Ok(()),
            _ => Err(http_error(a.status, &a.headers, &a.body)),
        }
    }

    /// Tells the server what it does not know yet about the current action, and records
    /// that it was told. Runs before every poll; a feedback that fails is sent again next
    /// time (the record moves on only after the server took it).
    fn report(&mut self) {
        let Some(rec) = action::load(&self.paths) else {
            return;
        };
        let mut versions = VersionRecords::load(&self.paths).unwrap_or_default();
        // A new agent is on probation while the boot guard's record names it: the same
        // meaning as svc-server's `probation`, so one rule serves both.
        if let Some(boot) = crate::update::rollback::load_boot(&self.paths) {
            versions.entry("svc-agent").probation = Some(boot.version);
        }
        let cache = self.paths.cache_dir();
        let config_now = std::fs::read(self.paths.state_dir().join("config.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .map(|v| config_digest(&v));
        let staged = |name: &str, version: &str| {
            if name == ddi::CHUNK_CONFIG {
                config_now.as_deref() == Some(version)
            } else if name == ddi::CHUNK_OS {
                // Downloaded and verified; RAUC waits for the reboot's rule (`update: skip`).
                crate::osimage::bundle_ready(&self.paths, version)
            } else {
                cache.join(format!("{name}-{version}")).is_file()
            }
        };
        let os = crate::osimage::OsState::load(&self.paths);
        let Some(fb) = action::due(&rec, &versions, &os, &staged) else {
            return;
        };
        match self.send_feedback(&rec.id, &fb) {
            Ok(()) => {
                crate::info!(SUB, "action {}: told the server {fb:?}", rec.id);
                if matches!(fb, Feedback::Failure(_)) {
                    // What runs now, as attributes: DDI's `installedBase` is the server's
                    // record of the last successful action (read-only for a device), so
                    // after a rollback or a refusal the device's own account of its
                    // versions travels as `configData` (docs/hawkbit.md).
                    if let Err(e) = self.send_config_data() {
                        crate::warn!(SUB, "configData after a failure not sent ({e})");
                    }
                }
                let mut next = rec;
                next.stage = fb.stage();
                if let Feedback::Proceeding { cnt, .. } = fb {
                    next.progress = cnt;
                }
                if let Some(c) = action::Closing::of(&fb) {
                    // A target the engine refused for bytes that did not match the
                    // server's hash: an offer again downloads it again.
                    next.transfer_failed |= !c.success
                        && next.targets.iter().any(|(n, v)| {
                            versions
                                .get(n)
                                .and_then(|r| r.refused.as_ref())
                                .is_some_and(|x| x.transfer && &x.version == v)
                        });
                    next.closing = Some(c);
                    self.closed_now = true;
                    // Over: the image's unpacked files are copies of what the engine keeps
                    // in its cache (or of what it refused), so each build stays once.
                    if let Err(e) = crate::update::swu::drop_unpacked(&self.paths) {
                        crate::warn!(SUB, "action {}: {e}", next.id);
                    }
                }
                self.save(&next);
            }
            Err(e) => crate::warn!(SUB, "action {}: feedback not sent ({e}); retried", rec.id),
        }
    }

    fn save(&self, rec: &ActionRecord) {
        let saved = StateLock::acquire(&self.paths)
            .map_err(HawkbitError::Lock)
            .and_then(|lock| action::save(&self.paths, rec, &lock));
        if let Err(e) = saved {
            crate::error!(SUB, "action {}: {e}", rec.id);
        }
    }

    /// `PUT configData`: what the machine runs and what it is, in the attribute names SWUpdate
    /// devices use (`hw_boardname`, `sw_version`; gooseBit registers a device by them) and
    /// ours. Sent when the server asks (the base names the resource); hawkBit stops asking
    /// once it has them. Our own URL, never the link's.
    fn send_config_data(&mut self) -> Result<(), ProtocolError> {
        let versions = VersionRecords::load(&self.paths).unwrap_or_default();
        let current = |name: &str| {
            versions
                .get(name)
                .and_then(|r| r.current.clone())
                .unwrap_or_else(|| "none".into())
        };
        let doc = serde_json::json!({
            "mode": "merge",
            "data": config_data(&current("svc-agent"), &current("svc-server"), &self.board),
        });
        let url = format!("{}/configData", self.base);
        let a = self.send_json(true, &url, &doc)?;
        if (200..300).contains(&a.status) {
            Ok(())
        } else {
            Err(http_error(a.status, &a.headers, &a.body))
        }
    }

    /// The server asks to stop an action (`cancelAction`): accepted (`closed` + `success`)
    /// while none of its targets is active yet, and the targets are withdrawn, so the
    /// engine's download (or a staged version) is dropped; rejected (`rejected`) once a
    /// target is active: the action goes on to its probation and its own report. `true`:
    /// accepted, the action is over.
    fn cancel(&mut self, link: &str) -> Result<bool, ProtocolError> {
        let a = exchange_capped(self.get(link), ddi::MAX_DDI_BYTES)?;
        self.last_bytes.1 += a.body.len() as u64;
        if a.status != 200 {
            return Err(http_error(a.status, &a.headers, &a.body));
        }
        let (cancel_id, stop) = ddi::parse_cancel(&a.body).map_err(ProtocolError::BadAnswer)?;
        // Activation happens on the loop's thread, the one polling here (this transport
        // holds no polls on another), so "active" cannot change until the answer is applied.
        let rec = action::load(&self.paths).filter(|r| r.id == stop);
        let versions = VersionRecords::load(&self.paths).unwrap_or_default();
        // An OS image, once taken, runs to its end: its download and RAUC's write of the
        // other slot happen off the loop and are not withdrawn half-way (a slot written
        // and made primary would be booted all the same).
        let active = rec.as_ref().is_some_and(|r| {
            r.targets.iter().any(|(name, version)| {
                name == ddi::CHUNK_OS
                    || versions.get(name).and_then(|v| v.current.as_deref())
                        == Some(version.as_str())
            })
        });
        let (execution, finished, why) = if active {
            (
                "rejected",
                "none",
                format!("action {stop} is already active; it runs on to its probation"),
            )
        } else {
            (
                "closed",
                "success",
                format!("action {stop} stopped before activation"),
            )
        };
        let doc = serde_json::json!({
            "id": cancel_id,
            "status": {"execution": execution, "result": {"finished": finished}, "details": [why]},
        });
        let url = format!("{}/cancelAction/{cancel_id}/feedback", self.base);
        let a = self.send_json(false, &url, &doc)?;
        if !(200..300).contains(&a.status) {
            return Err(http_error(a.status, &a.headers, &a.body));
        }
        crate::info!(SUB, "cancel {cancel_id}: {why}");
        if active {
            return Ok(false);
        }
        // Over for this agent: a deployment of that id offered again is not taken.
        let over = ActionRecord {
            stage: Stage::Closed,
            ..ActionRecord::new(&stop, rec.map(|r| r.targets).unwrap_or_default())
        };
        self.save(&over);
        Ok(true)
    }

    /// An action waits for consent (`confirmationBase`): its document is read and checked
    /// like a deployment; the decision (`auto_confirm`, or the local command's on this very
    /// action) is sent as `POST confirmationBase/{id}/feedback`, once; without one, the action
    /// is recorded for the status and the command, and waits. Nothing is downloaded for it.
    fn confirm(&mut self, link: &str) -> Result<(), ProtocolError> {
        let a = exchange_capped(self.get(link), ddi::MAX_DDI_BYTES).map_err(|e| match e {
            ProtocolError::BadAnswer(m) => {
                ProtocolError::BadAnswer(format!("confirmationBase: {m}"))
            }
            e => e,
        })?;
        self.last_bytes.1 += a.body.len() as u64;
        if a.status != 200 {
            return Err(http_error(a.status, &a.headers, &a.body));
        }
        let d = ddi::parse_confirmation(&a.body, &self.server, link)
            .map_err(|e| ProtocolError::BadAnswer(format!("confirmationBase: {e}")))?;
        let lock =
            StateLock::acquire(&self.paths).map_err(|e| ProtocolError::Setup(e.to_string()))?;
        let mut c = match consent::load(&self.paths) {
            Some(c) if c.action == d.id => c,
            _ => consent::Consent {
                action: d.id.clone(),
                targets: d.wanted(),
                decision: None,
                by: None,
                told: false,
            },
        };
        if c.decision.is_none() && self.auto_confirm {
            c.decision = Some(consent::Decision::Confirmed);
            c.by = Some("auto_confirm".into());
        }
        let fresh = consent::load(&self.paths).as_ref() != Some(&c);
        if fresh {
            consent::save(&self.paths, &c, &lock)
                .map_err(|e| ProtocolError::Setup(e.to_string()))?;
        }
        drop(lock);
        let Some(decision) = c.decision.filter(|_| !c.told) else {
            if fresh {
                crate::info!(
                    SUB,
                    "action {} waits for consent ({:?}): `svc-agent hawkbit confirm --action {0}` or `decline`",
                    d.id,
                    d.wanted()
                );
            }
            return Ok(());
        };
        let by = c.by.clone().unwrap_or_default();
        let doc = serde_json::json!({
            "confirmation": decision.word(),
            "details": [format!("{} by {by} on the device", decision.word())],
        });
        let url = format!("{}/confirmationBase/{}/feedback", self.base, d.id);
        let a = self.send_json(false, &url, &doc)?;
        if !(200..300).contains(&a.status) {
            return Err(http_error(a.status, &a.headers, &a.body));
        }
        crate::info!(SUB, "action {}: consent {} ({by})", d.id, decision.word());
        let lock =
            StateLock::acquire(&self.paths).map_err(|e| ProtocolError::Setup(e.to_string()))?;
        // Only if the decision is still the one sent (the command may have changed it).
        if let Some(mut now) =
            consent::load(&self.paths).filter(|n| n.action == d.id && n.decision == Some(decision))
        {
            now.told = true;
            consent::save(&self.paths, &now, &lock)
                .map_err(|e| ProtocolError::Setup(e.to_string()))?;
        }
        Ok(())
    }

    /// The `svc-config` chunk's artifact: fetched with the token from the server's origin
    /// (a document, like the DDI resources: capped, never followed elsewhere), checked
    /// against the deployment's size and sha256, then validated by the one config validator
    /// (`config::parse_str`, as a config from the management app). `Err`: why, naming the
    /// JSON pointers; nothing of it is applied.
    fn fetch_config(&mut self, t: &crate::protocol::Target) -> Result<Value, String> {
        let cap = crate::protocol::MAX_ANSWER_BYTES;
        if t.size.is_some_and(|s| s > cap) {
            return Err(format!("the config artifact is larger than {cap} bytes"));
        }
        let body = match t.url.strip_prefix("file://") {
            // Taken out of an SWUpdate image by the engine (`update::swu`), which checked it
            // against the image's signed description; the checks below apply all the same.
            // The text is the refusal the server is told (`refuse`), so flattened here.
            Some(path) => crate::update::swu::read_unpacked(&self.paths, Path::new(path), cap)
                .map_err(|e| format!("the config from the image: {e}"))?,
            None => {
                let a = exchange_capped(self.get(&t.url), cap)
                    .map_err(|e| format!("the config artifact: {e}"))?;
                self.last_bytes.1 += a.body.len() as u64;
                if a.status != 200 {
                    return Err(format!("the config artifact: HTTP {}", a.status));
                }
                a.body
            }
        };
        if Some(body.len() as u64) != t.size {
            return Err(format!(
                "the config artifact has {} bytes, the deployment says {}",
                body.len(),
                t.size.unwrap_or(0)
            ));
        }
        use sha2::Digest;
        let got = crate::encoding::hex(&sha2::Sha256::digest(&body));
        if !t
            .sha256
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case(&got))
        {
            return Err(format!(
                "the config artifact's sha256 {got} does not match the deployment's"
            ));
        }
        let text = std::str::from_utf8(&body)
            .map_err(|_| "the config artifact is not UTF-8 text".to_string())?;
        match crate::config::parse_str(text) {
            Ok(_) => serde_json::from_str(text).map_err(|e| format!("the config artifact: {e}")),
            Err(report) => {
                let errors: Vec<String> = report
                    .errors
                    .iter()
                    .take(8)
                    .map(|d| d.to_string())
                    .collect();
                Err(format!(
                    "the config {} was rejected ({} errors): {}",
                    t.version,
                    report.errors.len(),
                    errors.join("; ")
                ))
            }
        }
    }

    /// Fetches and checks the deployment behind `link`. `Ok(None)`: nothing to do now (an
    /// action over for this agent, told again; a refused one, told; one to wait for). A
    /// refusal the server was told about is a poll that worked (issue 46: it must not slow
    /// the poll); `Err` is for the server's and the network's failures.
    fn deployment(&mut self, link: &str) -> Result<Option<PollAnswer>, ProtocolError> {
        let a = exchange_capped(self.get(link), ddi::MAX_DDI_BYTES).map_err(|e| match e {
            ProtocolError::BadAnswer(m) => ProtocolError::BadAnswer(format!("deploymentBase: {m}")),
            e => e,
        })?;
        self.last_bytes.1 += a.body.len() as u64;
        // The action is gone between the base and this read (cancelled and removed, another
        // assigned): nothing to do now, and no failed poll (that would wait an hour, the
        // rule for other 4xx); the next poll, at the server's interval, reads the base again.
        if matches!(a.status, 404 | 410) {
            crate::warn!(
                SUB,
                "{link}: HTTP {}: the action is no longer there; the next poll reads the base again",
                a.status
            );
            self.deployment_gone = true;
            return Ok(None);
        }
        if a.status != 200 {
            return Err(http_error(a.status, &a.headers, &a.body));
        }
        let known = action::load(&self.paths);
        let mut d = match ddi::parse_deployment(&a.body, &self.server) {
            Ok(d) => d,
            // Refused whole: nothing reaches the engine. The server hears why.
            Err(why) => {
                return match ddi::action_id(&a.body) {
                    Some(id) => self.refuse(known, &id, Vec::new(), &why, false),
                    None => Err(ProtocolError::BadAnswer(format!("deploymentBase: {why}"))),
                }
            }
        };
        let known = match known {
            Some(r) if r.id == d.id && r.is_over() => {
                if !self.offered_again(r)? {
                    return Ok(None);
                }
                None
            }
            k => k,
        };
        // SWUpdate images (`update::swu`): downloaded and taken apart by the engine, each file
        // checked against sw-description's sha256 and the vendor key; their files become the
        // targets (and the config). Not while the server says `download: skip` (nothing is
        // fetched then). A refused archive is refused whole, as a bad document is.
        if !d.swu.is_empty() && d.download != ddi::Handling::Skip {
            if let Err(why) = self.unpack_swu(&mut d) {
                return match why {
                    SwuFailure::Refused { why, transfer } => {
                        self.refuse(None, &d.id, Vec::new(), &why, transfer)
                    }
                    SwuFailure::Transient(e) => Err(e),
                    SwuFailure::OverBudget { until } => {
                        self.swu_waits = true;
                        self.tell_budget_wait(&d.id, until);
                        Ok(None)
                    }
                };
            }
            self.swu_waits = false;
        }
        let Some((hold, fresh)) = self.take(&d, known) else {
            return Ok(None);
        };
        // Read again whenever the deployment is (an agent that restarted before applying
        // it gets it again); the record names it by its content's digest.
        let config = match &d.config {
            Some(t) => match self.fetch_config(t) {
                Ok(v) => {
                    let entry = (ddi::CHUNK_CONFIG.to_string(), config_digest(&v));
                    if let Some(mut r) = action::load(&self.paths).filter(|r| r.id == d.id) {
                        if !r.targets.contains(&entry) {
                            r.targets.retain(|(n, _)| n != ddi::CHUNK_CONFIG);
                            r.targets.push(entry);
                            self.save(&r);
                        }
                    }
                    Some(v)
                }
                // Refused whole: no target of this action reaches the engine either.
                Err(why) => {
                    let known = action::load(&self.paths).filter(|r| r.id == d.id);
                    let targets = known
                        .as_ref()
                        .map(|r| r.targets.clone())
                        .unwrap_or_default();
                    return self.refuse(None, &d.id, targets, &why, false);
                }
            },
            _ => None,
        };
        if let Some(h) = &hold {
            crate::info!(SUB, "{h}: downloaded and kept, not activated");
        }
        if fresh {
            // The server hears at once that the action was taken (after the config is in
            // the record: an action of no targets yet would read as done).
            self.report();
        }
        Ok(Some(PollAnswer {
            targets: d.targets,
            hold,
            config,
            ..PollAnswer::default()
        }))
    }

    /// Records action `d` as taken and how the server asks it to wait. `None`: `download:
    /// skip`, nothing to fetch yet; else the activation's hold, if any, and whether the
    /// action is new.
    fn take(
        &mut self,
        d: &ddi::Deployment,
        known: Option<ActionRecord>,
    ) -> Option<(Option<String>, bool)> {
        // Download only (`update: skip`) or the server's maintenance window closed: the
        // engine downloads and verifies, the agent's activation gate waits (one rule with
        // its own window and busy gate). `download: skip`: nothing is fetched yet.
        let hold = if d.update == ddi::Handling::Skip {
            Some(format!("action {}: download only (update: skip)", d.id))
        } else if d.window_closed {
            Some(format!(
                "action {}: the server's maintenance window is closed",
                d.id
            ))
        } else {
            None
        };
        let download_only = d.update == ddi::Handling::Skip;
        // The record's `hold`: the deployment is read again at each poll while it waits.
        let waits = hold.is_some() || d.download == ddi::Handling::Skip;
        let fresh = match known {
            Some(r) if r.id == d.id => {
                if r.hold != waits || r.download_only != download_only {
                    let mut next = r;
                    next.hold = waits;
                    next.download_only = download_only;
                    self.save(&next);
                }
                false
            }
            _ => {
                self.save(&ActionRecord {
                    hold: waits,
                    download_only,
                    ..ActionRecord::new(&d.id, d.wanted())
                });
                crate::info!(SUB, "action {}: {:?}", d.id, d.wanted());
                true
            }
        };
        if d.download == ddi::Handling::Skip {
            crate::info!(
                SUB,
                "action {}: the server asks not to download yet (download: skip)",
                d.id
            );
            return None;
        }
        Some((hold, fresh))
    }

    /// Action `id` refused before anything of it reached the engine, for `why`: recorded and
    /// told (`closed` + `failure`). `transfer`: the bytes did not match the server's hash,
    /// so an offer again downloads again. An action over already is told again instead.
    fn refuse(
        &mut self,
        known: Option<ActionRecord>,
        id: &str,
        targets: Vec<(String, String)>,
        why: &str,
        transfer: bool,
    ) -> Result<Option<PollAnswer>, ProtocolError> {
        if let Some(r) = known.filter(|r| r.id == id && r.is_over()) {
            self.offered_again(r)?;
            return Ok(None);
        }
        crate::error!(SUB, "action {id} refused: {why}");
        self.save(&ActionRecord {
            refused: Some(format!("refused by svc-agent: {why}")),
            transfer_failed: transfer,
            ..ActionRecord::new(id, targets)
        });
        self.report();
        if action::load(&self.paths).is_some_and(|r| r.id == id && r.stage == Stage::Closed) {
            Ok(None)
        } else {
            // Not told: the poll failed, and the next one tells it.
            Err(ProtocolError::BadAnswer(format!("deploymentBase: {why}")))
        }
    }

    /// An action over for this agent, offered again: a server that has not caught up, or
    /// an operator asking again (gooseBit's Force update offers the same id). One whose
    /// download did not match the server's hash is taken again (`true`); any other is told
    /// its `closed` feedback again, and the log says once what the operator can do.
    fn offered_again(&mut self, mut r: ActionRecord) -> Result<bool, ProtocolError> {
        // Closed by this poll's feedback, or a refusal not told yet (`report` tells it at the
        // next poll): not an offer again.
        if self.closed_now || r.stage != Stage::Closed {
            return Ok(false);
        }
        if r.transfer_failed {
            crate::warn!(
                SUB,
                "action {}: offered again after its download did not match the server's hash: downloading it again",
                r.id
            );
            self.clear_transfer_refusals(&r.targets);
            return Ok(true);
        }
        let hint = match &r.closing {
            Some(c) => {
                self.send_feedback(&r.id, &c.feedback())?;
                if c.success {
                    format!("action {} succeeded already; offered again, `success` is told again (nothing is installed twice)", r.id)
                } else {
                    format!(
                        "action {} failed ({}); offered again, the failure is told again. To retry it, fix the cause and publish it as a new version (assign that); a download that did not match the server's hash is downloaded again when offered again",
                        r.id, c.details
                    )
                }
            }
            None => format!(
                "action {} was stopped (cancelAction); offered again, it is not taken: assign it as a new action",
                r.id
            ),
        };
        if r.reoffers == 0 {
            crate::warn!(SUB, "{hint}");
        } else {
            crate::debug!(SUB, "{hint}");
        }
        r.reoffers = r.reoffers.saturating_add(1);
        self.save(&r);
        Ok(false)
    }

    /// Lifts the engine's record of a transfer refusal of `targets`, so that the download
    /// is tried again and the feedback rule does not read the old refusal as the outcome.
    fn clear_transfer_refusals(&self, targets: &[(String, String)]) {
        let cleared = StateLock::acquire(&self.paths).and_then(|held| {
            let mut records = VersionRecords::load(&self.paths)?;
            let mut changed = false;
            for (name, version) in targets {
                let rec = records.entry(name);
                if rec
                    .refused
                    .as_ref()
                    .is_some_and(|x| x.transfer && &x.version == version)
                {
                    rec.refused = None;
                    changed = true;
                }
            }
            if changed {
                records.save(&self.paths, &held)?;
            }
            Ok(())
        });
        if let Err(e) = cleared {
            crate::error!(SUB, "clearing a transfer refusal: {e}");
        }
    }
}

/// What identifies a config's content: the sha256 of its compact JSON (the agent keeps the
/// config it applied as `config.json`, pretty-printed; the digest compares content).
fn config_digest(v: &Value) -> String {
    use sha2::Digest;
    // Keys sorted at every level: the same content in another order is the same config.
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let bytes = serde_json::to_vec(&sorted(v)).unwrap_or_default();
    format!(
        "config-{}",
        &crate::encoding::hex(&sha2::Sha256::digest(&bytes))[..16]
    )
}

/// Progress feedback while an image downloads: at most one per this many of the engine's
/// progress lines (5 s apart by default: one feedback per 30 s), and only when the share
/// downloaded moved, so a fleet's downloads cost the server a bounded number of writes.
const PROGRESS_FEEDBACK_EVERY: u32 = 6;

impl HawkbitTransport {
    /// The engine's progress hook for image `version` of action `id`: `proceeding` with
    /// `Downloaded N%` in its details (the words gooseBit shows as progress, as SWUpdate's
    /// own) and the share as `progress` (`cnt` of 100). Sent on the download's thread; a
    /// feedback that fails is not retried (the next one says more).
    fn progress_feedback(&self, id: &str, version: &str) -> crate::update::ProgressHook {
        let url = format!("{}/deploymentBase/{id}/feedback", self.base);
        let identity = self.identity.clone();
        let (id, version) = (id.to_string(), version.to_string());
        let gap = self.download.progress_interval * PROGRESS_FEEDBACK_EVERY;
        let last: std::sync::Mutex<Option<(std::time::Instant, u64)>> = Default::default();
        crate::update::ProgressHook(std::sync::Arc::new(move |done, total| {
            let Some(total) = total.filter(|t| *t > 0) else {
                return;
            };
            let pct = (done.min(total) * 100 / total).min(99);
            let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|(at, p)| at.elapsed() < gap || p == pct) {
                return;
            }
            *last = Some((std::time::Instant::now(), pct));
            let doc = serde_json::json!({
                "id": id,
                "status": {
                    "execution": "proceeding",
                    "result": {"finished": "none", "progress": {"cnt": pct, "of": 100}},
                    "details": [format!(
                        "Downloaded {pct}% of image {version} ({:.1} of {:.1} MiB)",
                        done as f64 / 1048576.0,
                        total as f64 / 1048576.0
                    )],
                },
            });
            let body = serde_json::to_vec(&doc).unwrap_or_default();
            let req = http::post(&url, body, timeout_secs())
                .header("Content-Type", "application/json")
                .identity(Some(identity.clone()));
            match exchange_capped(req, ddi::MAX_DDI_BYTES) {
                Ok(a) if (200..300).contains(&a.status) => {
                    crate::debug!(SUB, "action {id}: told the server {pct}% downloaded")
                }
                Ok(a) => crate::debug!(SUB, "action {id}: progress not taken (HTTP {})", a.status),
                Err(e) => crate::debug!(SUB, "action {id}: progress not sent ({e})"),
            }
        }))
    }
}

/// Why the SWUpdate images of a deployment are not targets.
enum SwuFailure {
    /// The archive, its description or a file in it is refused: the action fails.
    /// `transfer`: the archive's bytes did not match the server's hash.
    Refused { why: String, transfer: bool },
    /// A network failure or a local one: the next poll tries again (a cut download resumes).
    Transient(ProtocolError),
    /// The byte budget holds the image until `until` (unix time): nothing was fetched; each
    /// poll asks the budget again, and the first in the next period downloads.
    OverBudget { until: u64 },
}

impl HawkbitTransport {
    /// Whether an image waits for the byte budget: this process saw it held, or the
    /// budget's record says so (after a restart).
    fn swu_waits_for_budget(&self) -> bool {
        self.swu_waits
            || crate::update::budget::status(self.download.budget.as_ref())
                .is_some_and(|b| b.waiting.contains_key(crate::update::swu::ARTIFACT_NAME))
    }

    /// Tells the server, once per wait, that action `id` waits for the byte budget until
    /// `until`: `proceeding`, never `failure` (nothing is wrong with the action). A feedback
    /// that fails is sent again at the next poll.
    fn tell_budget_wait(&mut self, id: &str, until: u64) {
        let told = (id.to_string(), until);
        if self.budget_told.as_ref() == Some(&told) {
            return;
        }
        let at = crate::logging::format_timestamp_ms(until.saturating_mul(1000));
        let fb = Feedback::Waiting(format!("waiting for the byte budget until {at}"));
        match self.send_feedback(id, &fb) {
            Ok(()) => self.budget_told = Some(told),
            Err(e) => crate::debug!(SUB, "action {id}: the budget's wait not told ({e})"),
        }
    }

    /// Takes the files out of each `.swu` of `d` through the engine and makes them `d`'s
    /// targets (`file://` artifacts with sw-description's sha256 and signature, which the
    /// engine checks again on its one verify and activate path).
    fn unpack_swu(&mut self, d: &mut ddi::Deployment) -> Result<(), SwuFailure> {
        for c in d.swu.clone() {
            let engine = crate::update::Engine::new(
                self.paths.clone(),
                crate::update::UpdateOptions {
                    download: DownloadOptions {
                        on_progress: Some(self.progress_feedback(&d.id, &c.version)),
                        ..self.download.clone()
                    },
                    ..Default::default()
                },
            );
            let offer = SwuOffer {
                url: c.url.clone(),
                version: c.version.clone(),
                size: c.size,
                sha256: c.sha256.clone(),
                sha1: c.sha1.clone(),
                identity: Some(self.identity.clone()),
            };
            let files = engine.unpack_swu(&offer).map_err(|e| {
                if let crate::update::UpdateError::OverBudget { until, .. } = e {
                    SwuFailure::OverBudget { until }
                } else if e.is_refusal() {
                    SwuFailure::Refused {
                        why: format!("SWUpdate image {}: {e}", c.version),
                        transfer: e.is_transfer_mismatch(),
                    }
                } else {
                    SwuFailure::Transient(ProtocolError::Network(format!(
                        "SWUpdate image {}: {e}",
                        c.version
                    )))
                }
            })?;
            for f in files {
                let slot = match f.name.as_str() {
                    ddi::CHUNK_SERVER => &mut d.targets.server,
                    ddi::CHUNK_AGENT => &mut d.targets.agent,
                    // The machine config: read and validated like an `svc-config` chunk's.
                    crate::update::swu::CONFIG_NAME => &mut d.config,
                    other => {
                        return Err(SwuFailure::Refused {
                            why: format!(
                                "SWUpdate image {}: {other:?} is not taken from an image by this version (docs/hawkbit.md)",
                                c.version
                            ),
                            transfer: false,
                        })
                    }
                };
                if slot.is_some() {
                    return Err(SwuFailure::Refused {
                        why: format!(
                            "SWUpdate image {}: a second {} in the deployment",
                            c.version, f.name
                        ),
                        transfer: false,
                    });
                }
                let a = f.artifact();
                *slot = Some(crate::protocol::Target {
                    version: a.version,
                    url: a.url,
                    sha256: a.sha256,
                    size: a.size,
                    signature: a.signature,
                    deltas: Vec::new(),
                });
            }
        }
        Ok(())
    }
}

/// The attributes of `PUT configData`: versions (`svc-agent` from the record, else the running
/// build's), architecture, and the SWUpdate names gooseBit and hawkBit UIs show: the board
/// (`hawkbit.board`, else the architecture) and svc-server's version.
fn config_data(agent: &str, server: &str, board: &str) -> serde_json::Value {
    let agent = if agent == "none" {
        env!("SVC_VERSION")
    } else {
        agent
    };
    serde_json::json!({
        "hw_boardname": board,
        "sw_version": server,
        "svc_agent_version": agent,
        "svc_server_version": server,
        "arch": std::env::consts::ARCH,
        "os": std::env::consts::OS,
    })
}

impl Transport for HawkbitTransport {
    /// `status` is not sent: hawkBit learns what runs from the feedback, which comes from
    /// the version records on disk (they outlive a power cut; a status in memory does not).
    fn poll(&mut self, _status: &Value, etag: Option<&str>) -> Result<PollOutcome, ProtocolError> {
        self.last_bytes = (0, 0);
        self.closed_now = false;
        self.report();
        // While an action waits on the server's word (its window, update: skip), the base
        // is read whole each poll, so that the deployment is read again whether or not the
        // server's links change with it.
        let holding = action::load(&self.paths).is_some_and(|r| r.hold && r.stage != Stage::Closed);
        let etag = etag.filter(|_| !holding && !self.swu_waits_for_budget());
        let mut req = self.get(&self.base);
        if let Some(tag) = etag {
            req = req.header("If-None-Match", tag);
        }
        let a = exchange_capped(req, ddi::MAX_DDI_BYTES)?;
        let header_bytes: u64 = a
            .headers
            .iter()
            .map(|(k, v)| (k.len() + v.len() + 4) as u64)
            .sum();
        self.last_bytes.1 += a.body.len() as u64 + header_bytes;
        match a.status {
            304 => return Ok(PollOutcome::NotModified),
            200 => {}
            _ => return Err(http_error(a.status, &a.headers, &a.body)),
        }
        let new_etag = header(&a.headers, "etag").map(str::to_string);
        let base = ddi::parse_base(&a.body, &self.server).map_err(ProtocolError::BadAnswer)?;
        if let Some(p) = &base.sleep_problem {
            crate::warn!(SUB, "{p}; the poll interval stays as it was");
        }
        if base.wants_config_data {
            // Not fatal to the poll: the deployment below does not depend on it, and the
            // server asks again next time.
            if let Err(e) = self.send_config_data() {
                crate::warn!(SUB, "configData not sent ({e}); sent again when asked");
            }
        }
        if !base.unsupported.is_empty() {
            crate::debug!(SUB, "not acted on yet: {}", base.unsupported.join(", "));
        }
        if let Some(link) = &base.confirmation {
            self.confirm(link)?;
        }
        let canceled = match &base.cancel {
            Some(link) => self.cancel(link)?,
            None => false,
        };
        if canceled || base.deployment.is_none() {
            // No deployment to wait for any more: the next poll may use the ETag again.
            self.swu_waits = false;
        }
        self.deployment_gone = false;
        let mut answer = match &base.deployment {
            Some(link) if !canceled => self.deployment(link)?.unwrap_or_default(),
            _ => PollAnswer::default(),
        };
        answer.poll_interval_secs = base.sleep_secs;
        Ok(PollOutcome::Changed {
            answer: Box::new(answer),
            etag: new_etag.filter(|_| !self.deployment_gone),
        })
    }

    fn send_logs(&mut self, _batch: &[u8]) -> Result<(), ProtocolError> {
        Err(ProtocolError::Setup(
            "hawkBit has no log channel (docs/hawkbit.md)".into(),
        ))
    }

    fn resolve_url(&self, url: &str) -> String {
        url.to_string()
    }

    fn last_poll_bytes(&self) -> (u64, u64) {
        self.last_bytes
    }

    fn set_budget(&mut self, budget: Option<crate::config::model::BudgetSettings>) {
        self.download.budget = crate::update::budget::Gate::of(&self.paths, budget);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::HawkbitAuth;

    #[test]
    fn the_token_is_read_tightened_and_never_quoted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("svc-hb-token-{}", std::process::id()));
        let paths = Paths::new(&dir);
        let p = paths.hawkbit_token();
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "s3cr3t-token-value\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(load_token(&paths).unwrap(), "s3cr3t-token-value");
        assert_eq!(crate::credentials::file_mode(&p), Some(0o600));
        std::fs::write(&p, "two words-secret-xyz").unwrap();
        let e = load_token(&paths).unwrap_err().to_string();
        assert!(!e.contains("words-secret"), "{e}");
        std::fs::remove_file(&p).unwrap();
        assert!(load_token(&paths)
            .unwrap_err()
            .to_string()
            .contains("cannot read"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn debug_names_the_resource_not_the_token() {
        let s = HawkbitSettings {
            server_url: "https://hb.example/".into(),
            tenant: "DEFAULT".into(),
            controller_id: "dev-1".into(),
            auth: HawkbitAuth::GatewayToken,
            auto_confirm: false,
            board: None,
            extra: Default::default(),
        };
        let t = HawkbitTransport::with_token(&Paths::new("/x"), &s, "tok-123");
        assert_eq!(
            format!("{t:?}"),
            "HawkbitTransport(https://hb.example/DEFAULT/controller/v1/dev-1)"
        );
        assert_eq!(t.identity.headers[0].1, "GatewayToken tok-123");
        assert_eq!(t.identity.origin, "https://hb.example");
    }
}

//! Improv Wi-Fi over BLE: the protocol and its authorization, as pure code (bytes in, bytes
//! and decisions out). Spec: the Improv BLE service (`00467768-6228-2272-4663-277478268000`),
//! RPC frames `command, length, data, checksum` (the low byte of the sum of the others),
//! possibly split over several GATT writes of 20 bytes.
//!
//! The BlueZ GATT application that carries these bytes is `ble.rs`; this module is the part
//! every transport shares.
//!
//! Authorization (Improv's "authorization required" state, which the spec leaves to a button):
//! a vendor RPC, `AUTHORIZE` (0xA0). With no data it answers a fresh 128-bit nonce; with 32
//! bytes it expects `HMAC-SHA256(label secret, nonce)` (one try per nonce, constant-time
//! compare). After `MAX_FAILURES` wrong answers it refuses every try for `LOCKOUT_SECS`. An
//! authorization lapses after `AUTHORIZED_SECS` without a command (the spec's advice). The
//! label secret therefore never crosses the air; the Wi-Fi pass key does (Improv carries it in
//! clear): docs/security.md.
//!
//! Authorization belongs to a connection, not to the device: `Centrals` keeps one `Session`
//! and one `Assembler` per central (keyed by the BlueZ device path bluetoothd passes with
//! every GATT call), so a second phone in range neither rides the owner's authorization nor
//! renews it, and its wrong answers lock out only its own connection. There is no lockout
//! shared by all centrals: before an answer is checked nobody can tell the owner from a
//! stranger, so any shared lock is one a stranger can trip. Guessing across reconnects is
//! bounded by the secret instead (128 random bits, 16 printable characters at least) and by
//! the number of centrals tracked at once (`MAX_CENTRALS`).
//!
//! Authorization by a button (#45; Improv's own answer, so that standard clients such as Home
//! Assistant's can finish): a press of the key the manufacturer names (`button.rs`)
//! authorizes one connection, never the device: the one central waiting when it is pressed,
//! or, with none waiting, the first to show up within `PRESS_SECS`. With several waiting, a
//! press authorizes none (a stranger in range must not share the owner's press). The
//! authorization then lapses as a label-secret one does.

use super::portal::{NetworkInput, NetworkRefused};
use sha2::{Digest, Sha256};

pub(crate) const SERVICE_UUID: &str = "00467768-6228-2272-4663-277478268000";
pub(crate) const CHAR_STATE: &str = "00467768-6228-2272-4663-277478268001";
pub(crate) const CHAR_ERROR: &str = "00467768-6228-2272-4663-277478268002";
pub(crate) const CHAR_RPC_COMMAND: &str = "00467768-6228-2272-4663-277478268003";
pub(crate) const CHAR_RPC_RESULT: &str = "00467768-6228-2272-4663-277478268004";
pub(crate) const CHAR_CAPABILITIES: &str = "00467768-6228-2272-4663-277478268005";

pub(crate) const CMD_WIFI_SETTINGS: u8 = 0x01;
pub(crate) const CMD_IDENTIFY: u8 = 0x02;
pub(crate) const CMD_DEVICE_INFO: u8 = 0x03;
pub(crate) const CMD_SCAN: u8 = 0x04;
/// Vendor command: the label-secret challenge (see the module comment).
pub(crate) const CMD_AUTHORIZE: u8 = 0xA0;

pub(crate) const AUTHORIZED_SECS: u64 = 60;
pub(crate) const MAX_FAILURES: u32 = 5;
pub(crate) const LOCKOUT_SECS: u64 = 300;
/// The largest frame: command, length, 255 bytes of data, checksum.
const MAX_FRAME: usize = 258;
/// Centrals with a session at once; a newcomer beyond them takes the place of the least
/// recently active unauthorized one that has been quiet for `EVICT_QUIET_SECS`, or is
/// refused (a GATT error) when there is none.
pub(crate) const MAX_CENTRALS: usize = 8;
const EVICT_QUIET_SECS: u64 = 10;
/// A central that wrote nothing for this long is forgotten (also when its disconnection
/// went unnoticed); longer than an authorization lives.
pub(crate) const IDLE_SECS: u64 = AUTHORIZED_SECS + 30;
/// A press with no central waiting goes to the first central that shows up within this.
pub(crate) const PRESS_SECS: u64 = 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum State {
    AuthorizationRequired = 0x01,
    Authorized = 0x02,
    Provisioning = 0x03,
    Provisioned = 0x04,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum ErrorCode {
    None = 0x00,
    InvalidRpc = 0x01,
    UnknownRpc = 0x02,
    UnableToConnect = 0x03,
    NotAuthorized = 0x04,
    #[allow(dead_code)] // In the protocol's table; every error here has a precise code.
    Unknown = 0xFF,
}

/// Reassembles RPC frames from GATT writes; never holds more than one frame.
#[derive(Default)]
pub(crate) struct Assembler {
    buf: Vec<u8>,
}

impl Assembler {
    /// A complete frame once its length is in, or an error for a frame that cannot be one.
    pub(crate) fn push(&mut self, write: &[u8]) -> Option<Result<Vec<u8>, ErrorCode>> {
        if self.buf.len() + write.len() > MAX_FRAME {
            self.buf.clear();
            return Some(Err(ErrorCode::InvalidRpc));
        }
        self.buf.extend_from_slice(write);
        let need = 3 + usize::from(*self.buf.get(1)?);
        match self.buf.len() {
            n if n < need => None,
            n if n == need => Some(Ok(std::mem::take(&mut self.buf))),
            _ => {
                self.buf.clear();
                Some(Err(ErrorCode::InvalidRpc))
            }
        }
    }
}

fn checksum(b: &[u8]) -> u8 {
    b.iter().fold(0u8, |a, &x| a.wrapping_add(x))
}

/// `command, len, data, checksum` → `(command, data)`.
pub(crate) fn parse_frame(f: &[u8]) -> Result<(u8, &[u8]), ErrorCode> {
    if f.len() < 3 || f.len() != 3 + usize::from(f[1]) {
        return Err(ErrorCode::InvalidRpc);
    }
    let (body, sum) = f.split_at(f.len() - 1);
    if checksum(body) != sum[0] {
        return Err(ErrorCode::InvalidRpc);
    }
    Ok((f[0], &body[2..]))
}

/// The Wi-Fi settings' result once the machine is online: the redirect URL, if any.
pub(crate) fn provisioned_result(redirect: &str) -> Vec<u8> {
    let r: &[&[u8]] = if redirect.is_empty() {
        &[]
    } else {
        &[redirect.as_bytes()]
    };
    encode_result(CMD_WIFI_SETTINGS, r)
}

/// An RPC result: `command, len, (len, bytes)*, checksum`. Strings past 255 bytes in all are
/// left out (the frame's length byte bounds them).
pub(crate) fn encode_result(cmd: u8, strings: &[&[u8]]) -> Vec<u8> {
    let mut data = Vec::new();
    for s in strings {
        let s = &s[..s.len().min(255)];
        if data.len() + 1 + s.len() > 255 {
            break;
        }
        data.push(s.len() as u8);
        data.extend_from_slice(s);
    }
    let mut out = vec![cmd, data.len() as u8];
    out.extend_from_slice(&data);
    out.push(checksum(&out));
    out
}

/// `ssid_len, ssid, psk_len, psk`, checked by the portal's rules.
pub(crate) fn parse_wifi_settings(data: &[u8]) -> Result<NetworkInput, NetworkRefused> {
    let malformed = |what: &str| NetworkRefused::Malformed(what.to_string());
    let take = |d: &[u8], at: usize| -> Option<(Vec<u8>, usize)> {
        let n = usize::from(*d.get(at)?);
        Some((d.get(at + 1..at + 1 + n)?.to_vec(), at + 1 + n))
    };
    let (ssid, next) = take(data, 0).ok_or_else(|| malformed("malformed Wi-Fi settings"))?;
    let (psk, end) = take(data, next).ok_or_else(|| malformed("malformed Wi-Fi settings"))?;
    if end != data.len() {
        return Err(malformed("malformed Wi-Fi settings"));
    }
    let ssid = String::from_utf8(ssid).map_err(|_| malformed("the SSID is not UTF-8"))?;
    let psk = String::from_utf8(psk).map_err(|_| malformed("the pass key is not UTF-8"))?;
    super::portal::check_network(&ssid, &psk, false)?;
    Ok(NetworkInput {
        ssid,
        psk,
        eap: None,
    })
}

pub(crate) fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| k.iter().map(|x| x ^ b).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What the transport must do after a write.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// Set (and notify) Current State.
    State(State),
    /// Set (and notify) Error State.
    Error(ErrorCode),
    /// Set (and notify) RPC Result.
    Result(Vec<u8>),
    /// Blink, beep: the Identify command.
    Identify,
    /// Save and join this network (the portal's path); report back with `joined`.
    Join(NetworkInput),
}

/// What a session needs from the device.
pub(crate) struct Device {
    /// `firmware, version, hardware, device name`.
    pub info: [String; 4],
    /// `(ssid, rssi, secured)`.
    pub networks: Vec<(String, i32, bool)>,
}

/// One device's Improv state: the label secret, the authorization, the failures.
pub(crate) struct Session {
    secret: Vec<u8>,
    state: State,
    authorized_at: u64,
    failures: u32,
    locked_until: u64,
    nonce: Option<[u8; 16]>,
}

impl Session {
    /// `secret`: the per-device label secret (as printed, its bytes).
    pub(crate) fn new(secret: &[u8]) -> Session {
        Session {
            secret: secret.to_vec(),
            state: State::AuthorizationRequired,
            authorized_at: 0,
            failures: 0,
            locked_until: 0,
            nonce: None,
        }
    }

    #[cfg(test)]
    pub(crate) fn state(&self) -> State {
        self.state
    }

    /// Time passes: an unused authorization lapses.
    pub(crate) fn tick(&mut self, now: u64) -> Vec<Output> {
        if self.state == State::Authorized
            && now.saturating_sub(self.authorized_at) >= AUTHORIZED_SECS
        {
            self.state = State::AuthorizationRequired;
            return vec![Output::State(self.state)];
        }
        Vec::new()
    }

    /// One complete frame (from `Assembler`). `nonce`: 16 fresh random bytes, used when
    /// the frame asks for a challenge.
    pub(crate) fn handle(
        &mut self,
        frame: &[u8],
        now: u64,
        dev: &Device,
        nonce: [u8; 16],
    ) -> Vec<Output> {
        let (cmd, data) = match parse_frame(frame) {
            Ok(x) => x,
            Err(e) => return vec![Output::Error(e)],
        };
        // An authorization that lapsed is gone before the frame is judged, whether or not
        // a tick came first.
        let lapsed = self.tick(now);
        let mut out = vec![Output::Error(ErrorCode::None)];
        if self.state == State::Authorized {
            self.authorized_at = now;
        }
        match cmd {
            CMD_IDENTIFY => out.push(Output::Identify),
            CMD_DEVICE_INFO => {
                let i: Vec<&[u8]> = dev.info.iter().map(|s| s.as_bytes()).collect();
                out.push(Output::Result(encode_result(cmd, &i)));
            }
            CMD_AUTHORIZE => self.authorize(data, now, nonce, &mut out),
            CMD_SCAN | CMD_WIFI_SETTINGS if self.state != State::Authorized => {
                out = vec![Output::Error(ErrorCode::NotAuthorized)];
            }
            CMD_SCAN => {
                for (ssid, rssi, secured) in &dev.networks {
                    let rssi = rssi.to_string();
                    let auth: &[u8] = if *secured { b"YES" } else { b"NO" };
                    out.push(Output::Result(encode_result(
                        cmd,
                        &[ssid.as_bytes(), rssi.as_bytes(), auth],
                    )));
                }
                out.push(Output::Result(encode_result(cmd, &[])));
            }
            CMD_WIFI_SETTINGS => match parse_wifi_settings(data) {
                Ok(net) => {
                    self.state = State::Provisioning;
                    out.push(Output::State(self.state));
                    out.push(Output::Join(net));
                }
                Err(_) => out = vec![Output::Error(ErrorCode::InvalidRpc)],
            },
            _ => out = vec![Output::Error(ErrorCode::UnknownRpc)],
        }
        lapsed.into_iter().chain(out).collect()
    }

    fn authorize(&mut self, data: &[u8], now: u64, fresh: [u8; 16], out: &mut Vec<Output>) {
        if now < self.locked_until {
            *out = vec![Output::Error(ErrorCode::NotAuthorized)];
            return;
        }
        if data.is_empty() {
            self.nonce = Some(fresh);
            out.push(Output::Result(encode_result(CMD_AUTHORIZE, &[&fresh])));
            return;
        }
        // One try per nonce: a wrong answer (or none asked for) uses it up.
        let ok = self
            .nonce
            .take()
            .is_some_and(|n| ct_eq(&hmac_sha256(&self.secret, &n), data));
        if !ok {
            self.failures += 1;
            if self.failures >= MAX_FAILURES {
                self.failures = 0;
                self.locked_until = now + LOCKOUT_SECS;
            }
            *out = vec![Output::Error(ErrorCode::NotAuthorized)];
            return;
        }
        self.failures = 0;
        if self.state == State::AuthorizationRequired {
            self.state = State::Authorized;
            out.push(Output::State(self.state));
        }
        self.authorized_at = now;
    }

    /// The button was pressed for this connection: authorized (for `AUTHORIZED_SECS`).
    fn press(&mut self, now: u64) -> Vec<Output> {
        if self.state != State::AuthorizationRequired {
            return Vec::new();
        }
        self.state = State::Authorized;
        self.authorized_at = now;
        vec![Output::State(self.state)]
    }

    /// The network from `Output::Join` was tried. Online: provisioned, and the result
    /// carries `redirect` (may be empty). Not: back to authorized, "unable to connect".
    pub(crate) fn joined(&mut self, online: bool, now: u64, redirect: &str) -> Vec<Output> {
        if self.state != State::Provisioning {
            return Vec::new();
        }
        if online {
            self.state = State::Provisioned;
            vec![
                Output::State(self.state),
                Output::Result(provisioned_result(redirect)),
            ]
        } else {
            self.state = State::Authorized;
            self.authorized_at = now;
            vec![
                Output::State(self.state),
                Output::Error(ErrorCode::UnableToConnect),
            ]
        }
    }
}

/// A central's place in `Centrals`.
struct Central {
    session: Session,
    assembler: Assembler,
    /// When it last wrote.
    seen: u64,
    /// When the transport last saw it connected: a client waiting for the button press
    /// neither reads nor writes, and must not be forgotten as idle meanwhile.
    alive: u64,
}

/// No room for another central (every tracked one is authorized or was active within
/// `EVICT_QUIET_SECS`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Busy;

/// Every connected central's own Improv session, frame assembler, nonce, authorization and
/// failures, keyed by its BlueZ device path (see the module comment). At most
/// `MAX_CENTRALS`.
pub(crate) struct Centrals {
    secret: Vec<u8>,
    by_path: std::collections::HashMap<String, Central>,
    /// Centrals forgotten (pushed out, idle, disconnected) since `take_gone`: the transport
    /// drops what it keeps for them.
    gone: Vec<String>,
    /// A button press no central has claimed yet (see the module comment).
    press: Option<u64>,
}

impl Centrals {
    pub(crate) fn new(secret: &[u8]) -> Centrals {
        Centrals {
            secret: secret.to_vec(),
            by_path: std::collections::HashMap::new(),
            gone: Vec::new(),
            press: None,
        }
    }

    /// `who`'s place, made when it has none (pushing out a quiet unauthorized central when
    /// all places are taken); an unclaimed press goes to a newcomer.
    fn enter(&mut self, who: &str, now: u64) -> Result<(&mut Central, Vec<Output>), Busy> {
        let mut out = Vec::new();
        if !self.by_path.contains_key(who) {
            if self.by_path.len() >= MAX_CENTRALS {
                let victim = self
                    .by_path
                    .iter()
                    .filter(|(_, c)| {
                        c.session.state == State::AuthorizationRequired
                            && now.saturating_sub(c.seen) >= EVICT_QUIET_SECS
                    })
                    .min_by_key(|(_, c)| c.seen)
                    .map(|(p, _)| p.clone())
                    .ok_or(Busy)?;
                self.by_path.remove(&victim);
                self.gone.push(victim);
            }
            let mut session = Session::new(&self.secret);
            if let Some(t) = self.press.take() {
                if now.saturating_sub(t) < PRESS_SECS {
                    out = session.press(now);
                }
            }
            let c = Central {
                session,
                assembler: Assembler::default(),
                seen: now,
                alive: now,
            };
            self.by_path.insert(who.to_string(), c);
        }
        let c = self.by_path.get_mut(who).ok_or(Busy)?;
        c.seen = now;
        Ok((c, out))
    }

    /// The central `who` read a characteristic (a standard client reads the state and
    /// waits for the press): it has a place, so that a press can find it.
    pub(crate) fn seen(&mut self, who: &str, now: u64) -> Result<Vec<Output>, Busy> {
        self.enter(who, now).map(|(_, out)| out)
    }

    /// The button was pressed: the one waiting central is authorized (its outputs), or
    /// with none waiting the press waits `PRESS_SECS` for one; with several, none is.
    pub(crate) fn press(&mut self, now: u64) -> Result<Vec<(String, Output)>, usize> {
        let waiting: Vec<String> = self
            .by_path
            .iter()
            .filter(|(_, c)| c.session.state == State::AuthorizationRequired)
            .map(|(p, _)| p.clone())
            .collect();
        match waiting.as_slice() {
            [] => {
                self.press = Some(now);
                Ok(Vec::new())
            }
            [who] => {
                let out = self
                    .by_path
                    .get_mut(who)
                    .map(|c| c.session.press(now))
                    .unwrap_or_default();
                Ok(out.into_iter().map(|o| (who.clone(), o)).collect())
            }
            several => Err(several.len()),
        }
    }

    /// One GATT write from central `who`: its outputs, for that central only.
    pub(crate) fn write(
        &mut self,
        who: &str,
        bytes: &[u8],
        now: u64,
        dev: &dyn Fn() -> Device,
        nonce: [u8; 16],
    ) -> Result<Vec<Output>, Busy> {
        let (c, mut out) = self.enter(who, now)?;
        out.extend(match c.assembler.push(bytes) {
            Some(Ok(frame)) => c.session.handle(&frame, now, &dev(), nonce),
            Some(Err(e)) => vec![Output::Error(e)],
            None => Vec::new(),
        });
        Ok(out)
    }

    /// Time passes: unused authorizations lapse (outputs per central), and centrals idle
    /// for `IDLE_SECS` are forgotten, except one whose network is being tried.
    pub(crate) fn tick(&mut self, now: u64) -> Vec<(String, Output)> {
        let mut out = Vec::new();
        let gone = &mut self.gone;
        self.by_path.retain(|who, c| {
            let last = c.seen.max(c.alive);
            if c.session.state != State::Provisioning && now.saturating_sub(last) >= IDLE_SECS {
                gone.push(who.clone());
                return false;
            }
            out.extend(c.session.tick(now).into_iter().map(|o| (who.clone(), o)));
            true
        });
        out
    }

    /// The transport saw `who` still connected (`Device1.Connected`): not idle.
    pub(crate) fn alive(&mut self, who: &str, now: u64) {
        if let Some(c) = self.by_path.get_mut(who) {
            c.alive = now;
        }
    }

    /// The central disconnected: its session goes (a later connection starts afresh).
    pub(crate) fn forget(&mut self, who: &str) {
        if self.by_path.remove(who).is_some() {
            self.gone.push(who.to_string());
        }
    }

    /// The centrals forgotten since the last call.
    pub(crate) fn take_gone(&mut self) -> Vec<String> {
        std::mem::take(&mut self.gone)
    }

    /// The paths of the centrals tracked now.
    pub(crate) fn paths(&self) -> Vec<String> {
        self.by_path.keys().cloned().collect()
    }

    /// `who`'s state (authorization required for a central without a session).
    #[cfg(test)]
    pub(crate) fn state_of(&self, who: &str) -> State {
        self.by_path
            .get(who)
            .map_or(State::AuthorizationRequired, |c| c.session.state())
    }

    /// The network `who` sent was tried: see `Session::joined`.
    pub(crate) fn joined(
        &mut self,
        who: &str,
        online: bool,
        now: u64,
        redirect: &str,
    ) -> Vec<Output> {
        self.by_path
            .get_mut(who)
            .map(|c| c.session.joined(online, now, redirect))
            .unwrap_or_default()
    }
}

/// GATT writes as a fuzzer sends them (each chunk: one length byte, then that many bytes,
/// at most 20; the length byte's top bits choose one of four centrals) through `Centrals`,
/// none authorized. Returns how many networks would be joined (0 unless the label secret's
/// HMAC was guessed: the fuzz target asserts it) and checks that no assembler holds more than
/// one frame and no more than `MAX_CENTRALS` are tracked.
pub fn fuzz_writes(data: &[u8]) -> usize {
    let mut c = Centrals::new(b"fuzz-label-secret");
    let dev = || Device {
        info: Default::default(),
        networks: vec![("n".into(), -50, true)],
    };
    let (mut joins, mut rest, mut now) = (0, data, 0u64);
    while let Some((&n, tail)) = rest.split_first() {
        let who = ["/dev_a", "/dev_b", "/dev_c", "/dev_d"][usize::from(n >> 6)];
        let len = usize::from(n % 21).min(tail.len());
        let (w, tail) = tail.split_at(len);
        rest = tail;
        now += 1;
        if let Ok(out) = c.write(who, w, now, &dev, [7; 16]) {
            joins += out.iter().filter(|o| matches!(o, Output::Join(_))).count();
        }
        assert!(c
            .by_path
            .values()
            .all(|x| x.assembler.buf.len() <= MAX_FRAME));
        assert!(c.by_path.len() <= MAX_CENTRALS);
        c.tick(now);
        c.take_gone();
    }
    joins
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A client's frame: command, length, data, checksum (also for `ble`'s tests).
    pub(crate) fn frame(cmd: u8, data: &[u8]) -> Vec<u8> {
        let mut f = vec![cmd, data.len() as u8];
        f.extend_from_slice(data);
        f.push(checksum(&f));
        f
    }

    /// A client's Wi-Fi settings frame.
    pub(crate) fn wifi(ssid: &[u8], psk: &[u8]) -> Vec<u8> {
        let mut d = vec![ssid.len() as u8];
        d.extend_from_slice(ssid);
        d.push(psk.len() as u8);
        d.extend_from_slice(psk);
        frame(CMD_WIFI_SETTINGS, &d)
    }

    fn dev() -> Device {
        Device {
            info: [
                "svc-agent".into(),
                "0.1.0".into(),
                "x86_64".into(),
                "lab".into(),
            ],
            networks: vec![("home".into(), -40, true)],
        }
    }

    const N: [u8; 16] = [3; 16];

    fn authorized(s: &mut Session, now: u64) {
        s.handle(&frame(CMD_AUTHORIZE, &[]), now, &dev(), N);
        let mac = hmac_sha256(b"label-secret-1", &N);
        let out = s.handle(&frame(CMD_AUTHORIZE, &mac), now, &dev(), N);
        assert!(out.contains(&Output::State(State::Authorized)), "{out:?}");
    }

    #[test]
    fn the_fuzz_entry_never_joins_without_authorization() {
        for seed in ["wifi", "scan"] {
            let p = format!("{}/fuzz/seeds/improv/{seed}", env!("CARGO_MANIFEST_DIR"));
            assert_eq!(fuzz_writes(&std::fs::read(p).unwrap()), 0);
        }
        assert_eq!(fuzz_writes(&[]), 0);
        assert_eq!(fuzz_writes(&[20; 1000]), 0);
    }

    #[test]
    fn hmac_matches_rfc4231_case_2() {
        let m = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            crate::encoding::hex(&m),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn frames_split_over_writes_are_reassembled_and_bad_ones_refused() {
        let f = wifi(b"home network", b"a long pass key of many bytes");
        assert!(f.len() > 20);
        let mut a = Assembler::default();
        assert_eq!(a.push(&f[..20]), None);
        assert_eq!(a.push(&f[20..]), Some(Ok(f.clone())));
        // Checksum, length and trailing bytes.
        let mut bad = f.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(parse_frame(&bad), Err(ErrorCode::InvalidRpc));
        assert_eq!(parse_frame(&[1, 5, 0]), Err(ErrorCode::InvalidRpc));
        let mut long = f.clone();
        long.push(0);
        assert_eq!(a.push(&long), Some(Err(ErrorCode::InvalidRpc)));
        // Oversized: never buffered past one frame.
        for _ in 0..12 {
            let _ = a.push(&[
                0x01, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ]);
        }
        assert!(a.buf.len() <= MAX_FRAME);
    }

    #[test]
    fn nothing_is_provisioned_or_scanned_without_authorization() {
        let mut s = Session::new(b"label-secret-1");
        let out = s.handle(&wifi(b"home", b"password-1"), 0, &dev(), N);
        assert_eq!(out, vec![Output::Error(ErrorCode::NotAuthorized)]);
        let out = s.handle(&frame(CMD_SCAN, &[]), 0, &dev(), N);
        assert_eq!(out, vec![Output::Error(ErrorCode::NotAuthorized)]);
        // Identify and device info are allowed (the spec's clients ask before authorizing).
        let out = s.handle(&frame(CMD_IDENTIFY, &[]), 0, &dev(), N);
        assert!(out.contains(&Output::Identify));
        // An answer without a challenge, a replayed answer, a wrong secret: refused.
        let mac = hmac_sha256(b"label-secret-1", &N);
        let out = s.handle(&frame(CMD_AUTHORIZE, &mac), 0, &dev(), N);
        assert_eq!(out, vec![Output::Error(ErrorCode::NotAuthorized)]);
        s.handle(&frame(CMD_AUTHORIZE, &[]), 0, &dev(), N);
        let wrong = hmac_sha256(b"label-secret-2", &N);
        let out = s.handle(&frame(CMD_AUTHORIZE, &wrong), 0, &dev(), N);
        assert_eq!(out, vec![Output::Error(ErrorCode::NotAuthorized)]);
        let out = s.handle(&frame(CMD_AUTHORIZE, &mac), 0, &dev(), N);
        assert_eq!(
            out,
            vec![Output::Error(ErrorCode::NotAuthorized)],
            "nonce used up"
        );
        assert_eq!(s.state(), State::AuthorizationRequired);
    }

    #[test]
    fn guessing_the_secret_is_locked_out() {
        let mut s = Session::new(b"label-secret-1");
        for _ in 0..MAX_FAILURES {
            s.handle(&frame(CMD_AUTHORIZE, &[]), 10, &dev(), N);
            s.handle(&frame(CMD_AUTHORIZE, &[0; 32]), 10, &dev(), N);
        }
        // The right answer is refused while locked, even with a fresh challenge.
        let out = s.handle(&frame(CMD_AUTHORIZE, &[]), 11, &dev(), N);
        assert_eq!(out, vec![Output::Error(ErrorCode::NotAuthorized)]);
        let mac = hmac_sha256(b"label-secret-1", &N);
        let out = s.handle(&frame(CMD_AUTHORIZE, &mac), 11, &dev(), N);
        assert_eq!(out, vec![Output::Error(ErrorCode::NotAuthorized)]);
        authorized(&mut s, 10 + LOCKOUT_SECS);
    }

    #[test]
    fn an_authorized_phone_provisions_and_gets_the_redirect() {
        let mut s = Session::new(b"label-secret-1");
        authorized(&mut s, 100);
        let out = s.handle(&frame(CMD_SCAN, &[]), 101, &dev(), N);
        assert_eq!(
            out[1],
            Output::Result(encode_result(CMD_SCAN, &[b"home", b"-40", b"YES"]))
        );
        assert_eq!(
            out.last(),
            Some(&Output::Result(vec![CMD_SCAN, 0, CMD_SCAN]))
        );
        let out = s.handle(
            &wifi(b"home \"$(reboot)\"", b"p'ss; rm -rf /"),
            102,
            &dev(),
            N,
        );
        let want = NetworkInput {
            ssid: "home \"$(reboot)\"".into(),
            psk: "p'ss; rm -rf /".into(),
            eap: None,
        };
        assert_eq!(out.last(), Some(&Output::Join(want)), "kept literally");
        assert_eq!(s.state(), State::Provisioning);
        let out = s.joined(false, 110, "");
        assert_eq!(out[1], Output::Error(ErrorCode::UnableToConnect));
        assert_eq!(s.state(), State::Authorized);
        s.handle(&wifi(b"home", b"password-1"), 111, &dev(), N);
        let out = s.joined(true, 120, "http://10.0.0.5/");
        assert_eq!(out[0], Output::State(State::Provisioned));
        assert_eq!(
            out[1],
            Output::Result(encode_result(CMD_WIFI_SETTINGS, &[b"http://10.0.0.5/"]))
        );
    }

    #[test]
    fn an_unused_authorization_lapses() {
        let mut s = Session::new(b"label-secret-1");
        authorized(&mut s, 0);
        assert!(s.tick(AUTHORIZED_SECS - 1).is_empty());
        s.handle(&frame(CMD_IDENTIFY, &[]), 30, &dev(), N);
        assert!(
            s.tick(AUTHORIZED_SECS + 1).is_empty(),
            "a command renews it"
        );
        assert_eq!(
            s.tick(30 + AUTHORIZED_SECS),
            vec![Output::State(State::AuthorizationRequired)]
        );
    }

    /// The portal's bad-input scenario, over Improv: each is refused and changes nothing.
    #[test]
    fn the_portals_bad_inputs_are_refused_over_improv_too() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("short pass key", wifi(b"home", b"short")),
            ("empty SSID", wifi(b"", b"password-1")),
            ("SSID over 32 bytes", wifi(&[b'a'; 33], b"password-1")),
            ("invalid UTF-8 SSID", wifi(b"\xff\xfe", b"password-1")),
            (
                "control byte in the pass key",
                wifi(b"home", b"pass\nword-1"),
            ),
            ("pass key of 64 non-hex", wifi(b"home", &[b'z'; 64])),
            ("truncated settings", frame(CMD_WIFI_SETTINGS, &[4, b'h'])),
            ("trailing bytes", {
                let mut f = wifi(b"home", b"password-1");
                f.pop();
                f.push(0);
                f.push(0);
                f
            }),
            ("unknown command", frame(0x7f, &[])),
        ];
        for (what, f) in cases {
            let mut s = Session::new(b"label-secret-1");
            authorized(&mut s, 0);
            let mut a = Assembler::default();
            let out = match a.push(&f) {
                Some(Ok(frame)) => s.handle(&frame, 1, &dev(), N),
                Some(Err(e)) => vec![Output::Error(e)],
                None => vec![],
            };
            assert!(
                !out.iter().any(|o| matches!(o, Output::Join(_))),
                "{what}: {out:?}"
            );
            assert_eq!(s.state(), State::Authorized, "{what}");
        }
    }

    /// Answers a challenge from `who` with `secret` through `Centrals`.
    fn answer(c: &mut Centrals, who: &str, secret: &[u8], now: u64) -> Vec<Output> {
        let out = c
            .write(who, &frame(CMD_AUTHORIZE, &[]), now, &dev, N)
            .unwrap();
        if !out.iter().any(|o| matches!(o, Output::Result(_))) {
            return out;
        }
        let mac = hmac_sha256(secret, &N);
        c.write(who, &frame(CMD_AUTHORIZE, &mac), now, &dev, N)
            .unwrap()
    }

    #[test]
    fn each_central_has_its_own_session_and_lockout() {
        let mut c = Centrals::new(b"label-secret-1");
        let out = answer(&mut c, "/owner", b"label-secret-1", 1);
        assert!(out.contains(&Output::State(State::Authorized)), "{out:?}");
        let out = c.write("/stranger", &wifi(b"evil", b"password-9"), 2, &dev, N);
        assert_eq!(out, Ok(vec![Output::Error(ErrorCode::NotAuthorized)]));
        // The owner's nonce is not the stranger's: the stranger's session has none.
        c.write("/owner", &frame(CMD_AUTHORIZE, &[]), 3, &dev, N)
            .unwrap();
        let mac = hmac_sha256(b"label-secret-1", &N);
        let out = c.write("/stranger", &frame(CMD_AUTHORIZE, &mac), 3, &dev, N);
        assert_eq!(out, Ok(vec![Output::Error(ErrorCode::NotAuthorized)]));
        for _ in 0..MAX_FAILURES {
            answer(&mut c, "/stranger", b"wrong-secret-000", 4);
        }
        let out = answer(&mut c, "/stranger", b"label-secret-1", 5);
        assert_eq!(out, vec![Output::Error(ErrorCode::NotAuthorized)], "locked");
        assert_eq!(c.state_of("/owner"), State::Authorized);
        let out = answer(&mut c, "/late-owner", b"label-secret-1", 5);
        assert!(out.contains(&Output::State(State::Authorized)), "{out:?}");
        // A disconnection ends the session.
        c.forget("/owner");
        assert_eq!(c.state_of("/owner"), State::AuthorizationRequired);
    }

    #[test]
    fn centrals_are_bounded_and_an_authorized_one_is_never_pushed_out() {
        let mut c = Centrals::new(b"label-secret-1");
        answer(&mut c, "/owner", b"label-secret-1", 0);
        let ping = frame(CMD_IDENTIFY, &[]);
        for i in 1..MAX_CENTRALS {
            c.write(&format!("/s{i}"), &ping, 0, &dev, N).unwrap();
        }
        // All active just now: a newcomer is refused, nobody is pushed out.
        assert_eq!(c.write("/new", &ping, 1, &dev, N), Err(Busy));
        // Quiet ones make room, the least recently active first; never the owner.
        let t = EVICT_QUIET_SECS + 1;
        c.write("/owner", &ping, t, &dev, N).unwrap();
        for i in 0..MAX_CENTRALS + 3 {
            c.write(
                &format!("/new{i}"),
                &ping,
                t + EVICT_QUIET_SECS * i as u64,
                &dev,
                N,
            )
            .unwrap();
            assert!(c.paths().len() <= MAX_CENTRALS);
        }
        assert!(c.paths().contains(&"/owner".to_string()));
        // Every central pushed out is listed for the transport (it drops their values).
        let gone = c.take_gone();
        assert_eq!(gone.len(), MAX_CENTRALS + 3, "{gone:?}");
        // Idle centrals are forgotten (the owner's authorization lapsed long before).
        c.tick(1000);
        assert!(c.paths().is_empty(), "{:?}", c.paths());
        assert!(c.take_gone().contains(&"/owner".to_string()));
    }

    /// #45: a button press authorizes one connection: the one waiting; a second central
    /// never rides it; the states go authorization required -> authorized -> provisioning
    /// -> provisioned; the authorization lapses unused.
    #[test]
    fn a_press_authorizes_the_one_waiting_central_only() {
        let mut c = Centrals::new(b"label-secret-0123");
        assert_eq!(c.seen("/owner", 1).unwrap(), vec![]);
        let out = c.press(2).unwrap();
        assert_eq!(
            out,
            vec![("/owner".into(), Output::State(State::Authorized))]
        );
        assert_eq!(c.state_of("/owner"), State::Authorized);
        // A stranger arriving after the press gets nothing from it.
        c.seen("/stranger", 3).unwrap();
        assert_eq!(c.state_of("/stranger"), State::AuthorizationRequired);
        let out = c
            .write("/stranger", &wifi(b"evil", b"password-9"), 4, &dev, [1; 16])
            .unwrap();
        assert_eq!(out, vec![Output::Error(ErrorCode::NotAuthorized)]);
        let out = c
            .write("/owner", &wifi(b"home", b"password-1"), 5, &dev, [1; 16])
            .unwrap();
        assert!(out.contains(&Output::State(State::Provisioning)), "{out:?}");
        assert!(out
            .iter()
            .any(|o| matches!(o, Output::Join(n) if n.ssid == "home")));
        let out = c.joined("/owner", true, 6, "");
        assert_eq!(out[0], Output::State(State::Provisioned));
    }

    #[test]
    fn a_press_with_several_waiting_authorizes_none_and_an_early_press_waits_bounded() {
        let mut c = Centrals::new(b"label-secret-0123");
        c.seen("/a", 1).unwrap();
        c.seen("/b", 1).unwrap();
        assert_eq!(c.press(2), Err(2));
        assert_eq!(c.state_of("/a"), State::AuthorizationRequired);
        assert_eq!(c.state_of("/b"), State::AuthorizationRequired);

        // Nobody waiting: the first central within PRESS_SECS takes the press, once.
        let mut c = Centrals::new(b"label-secret-0123");
        assert_eq!(c.press(10).unwrap(), vec![]);
        let out = c.seen("/late", 10 + PRESS_SECS - 1).unwrap();
        assert_eq!(out, vec![Output::State(State::Authorized)]);
        c.seen("/later", 10 + PRESS_SECS - 1).unwrap();
        assert_eq!(c.state_of("/later"), State::AuthorizationRequired);
        // Unused, the authorization lapses.
        let lapsed = c.tick(10 + PRESS_SECS - 1 + AUTHORIZED_SECS);
        assert!(lapsed.contains(&("/late".into(), Output::State(State::AuthorizationRequired))));

        // A press older than PRESS_SECS goes to nobody.
        let mut c = Centrals::new(b"label-secret-0123");
        c.press(10).unwrap();
        assert_eq!(c.seen("/too-late", 10 + PRESS_SECS).unwrap(), vec![]);
        assert_eq!(c.state_of("/too-late"), State::AuthorizationRequired);
    }

    /// A client waiting longer than `IDLE_SECS` for the press (connected all along, silent)
    /// still gets it.
    #[test]
    fn a_connected_client_waiting_long_for_the_press_still_gets_it() {
        let mut c = Centrals::new(b"label-secret-0123");
        c.seen("/owner", 0).unwrap();
        for t in 1..=IDLE_SECS * 2 {
            c.alive("/owner", t);
            c.tick(t);
        }
        assert_eq!(c.paths(), vec!["/owner".to_string()]);
        let out = c.press(IDLE_SECS * 2).unwrap();
        assert_eq!(
            out,
            vec![("/owner".into(), Output::State(State::Authorized))]
        );
        // Without the transport's word it is forgotten as before.
        let mut c = Centrals::new(b"label-secret-0123");
        c.seen("/gone", 0).unwrap();
        c.tick(IDLE_SECS);
        assert!(c.paths().is_empty());
    }
}

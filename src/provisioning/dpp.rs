//! Wi-Fi Easy Connect (DPP) enrollee. NetworkManager 1.42 has no DPP, so the exchange is
//! driven on wpa_supplicant's control socket (`wpactrl`) with `dpp_config_processing 0`:
//! wpa_supplicant reports the received network and adds nothing itself; the network goes
//! through the portal's checks (`check_ssid`, `check_psk`) and the portal's join path
//! (a NetworkManager profile `user-<ssid>`).
//!
//! The bootstrap key is the device's own, kept across boots (`/opt/svc/dpp/bootstrap.key`,
//! 0600) so the QR code printed on its label stays valid. It is a P-256 private scalar; the
//! key handed to wpa_supplicant is its RFC 5915 `ECPrivateKey` DER without the optional
//! public key (OpenSSL derives it), so no elliptic-curve code is needed here.
use super::portal::{NetworkInput, NetworkRefused};
use super::wpactrl::{command_name, Ctrl};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Channel 1 of 2.4 GHz: allowed everywhere, the hotspot's channel too.
pub(crate) const LISTEN_CHANNEL: &str = "81/1";
pub(crate) const LISTEN_FREQ: u32 = 2412;
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// The order of the P-256 group (big-endian): a private scalar is in 1..n-1.
const P256_ORDER: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
];

pub(crate) fn valid_scalar(d: &[u8; 32]) -> bool {
    d.iter().any(|&b| b != 0) && d.as_slice() < P256_ORDER.as_slice()
}

/// `ECPrivateKey ::= SEQUENCE { version 1, privateKey OCTET STRING (32), [0] prime256v1 }`.
pub(crate) fn key_der(d: &[u8; 32]) -> Vec<u8> {
    let mut v = vec![0x30, 0x31, 0x02, 0x01, 0x01, 0x04, 0x20];
    v.extend_from_slice(d);
    // [0] { OID 1.2.840.10045.3.1.7 }
    v.extend_from_slice(&[
        0xa0, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07,
    ]);
    v
}

use crate::encoding::{hex, hex_byte, unhex};

/// Where the enrollee keeps its key and publishes its URI and QR codes.
pub(crate) fn dir(paths: &crate::paths::Paths) -> PathBuf {
    paths.state_dir().join("dpp")
}

/// Why the DPP enrollee cannot start or go on; the text names the file, the socket or the
/// wpa_supplicant command, never a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DppError {
    /// The control socket could not be opened, or a request on it failed.
    Ctrl(String),
    /// wpa_supplicant refused a command (FAIL, UNKNOWN COMMAND) or answered something
    /// unexpected.
    Refused(String),
    /// The bootstrap key, the URI or its QR codes in the state directory.
    Files(String),
    /// No Wi-Fi interface with a control socket in this directory.
    NoInterface(PathBuf),
}

impl std::fmt::Display for DppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DppError::Ctrl(m) | DppError::Refused(m) | DppError::Files(m) => f.write_str(m),
            DppError::NoInterface(dir) => write!(
                f,
                "no wpa_supplicant control socket for a Wi-Fi interface in {}",
                dir.display()
            ),
        }
    }
}

impl std::error::Error for DppError {}

/// The device's bootstrap key: read from `path` (hex), or made from the kernel's random
/// bytes and written atomically, 0600, on first use. A file that is not a valid key is an
/// error (never silently replaced: the label would stop working).
pub(crate) fn load_or_create_key(path: &Path) -> Result<[u8; 32], DppError> {
    match std::fs::read_to_string(path) {
        Ok(s) => {
            let d: Option<[u8; 32]> = unhex(&s).and_then(|v| v.try_into().ok());
            match d {
                Some(d) if valid_scalar(&d) => Ok(d),
                _ => Err(DppError::Files(format!(
                    "{}: not a DPP bootstrap key (64 hex digits of a P-256 private scalar)",
                    path.display()
                ))),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut d = [0u8; 32];
            let mut rnd =
                std::fs::File::open("/dev/urandom").map_err(|e| DppError::Files(e.to_string()))?;
            // Rejection sampling: 1 try in 2^32 is out of range.
            loop {
                rnd.read_exact(&mut d)
                    .map_err(|e| DppError::Files(e.to_string()))?;
                if valid_scalar(&d) {
                    break;
                }
            }
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| DppError::Files(format!("{}: {e}", parent.display())))?;
            }
            crate::fsutil::atomic_write(path, format!("{}\n", hex(&d)).as_bytes(), 0o600)
                .map_err(|e| DppError::Files(format!("{}: {e}", path.display())))?;
            Ok(d)
        }
        Err(e) => Err(DppError::Files(format!("{}: {e}", path.display()))),
    }
}

/// The bootstrap command: the key travels over the control socket, never in an argv.
/// No `mac=`: NetworkManager gives the radio a random address while it scans disconnected
/// (`wifi.scan-rand-mac-address`), a new one after each failed activation and at each boot,
/// and a configurator sends its request to the URI's MAC when there is one. A label printed
/// with one boot's address would fail on the next; without it the request is broadcast.
pub(crate) fn bootstrap_gen_cmd(key: &[u8; 32]) -> String {
    format!(
        "DPP_BOOTSTRAP_GEN type=qrcode chan={LISTEN_CHANNEL} key={}",
        hex(&key_der(key))
    )
}

/// Undoes wpa_supplicant's `printf_encode` (how `DPP-CONFOBJ-SSID` carries the SSID):
/// `\\`, `\"`, `\e`, `\n`, `\r`, `\t` and `\xNN`.
pub(crate) fn printf_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = *b.get(i + 1)?;
        i += 2;
        out.push(match c {
            b'\\' => b'\\',
            b'"' => b'"',
            b'e' => 0x1b,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'x' => {
                let v = s.as_bytes().get(i..i + 2).and_then(hex_byte)?;
                i += 2;
                v
            }
            _ => return None,
        });
    }
    Some(out)
}

/// The DPP events the enrollee acts on.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DppEvent {
    /// A configuration arrived: what follows describes it.
    ConfReceived,
    Akm(String),
    Ssid(Option<Vec<u8>>),
    /// The passphrase (hex on the wire).
    Pass(Option<Vec<u8>>),
    /// The raw 256-bit PSK (64 hex digits).
    Psk(String),
    /// An exchange ended without a network (`DPP-FAIL`, `DPP-CONF-FAILED`, timeouts...).
    Failed(String),
    Other,
}

impl DppEvent {
    pub(crate) fn parse(line: &str) -> DppEvent {
        let (name, arg) = line.split_once(' ').unwrap_or((line, ""));
        match name {
            "DPP-CONF-RECEIVED" => DppEvent::ConfReceived,
            "DPP-CONFOBJ-AKM" => DppEvent::Akm(arg.trim().to_string()),
            "DPP-CONFOBJ-SSID" => DppEvent::Ssid(printf_decode(arg)),
            "DPP-CONFOBJ-PASS" => DppEvent::Pass(unhex(arg)),
            "DPP-CONFOBJ-PSK" => DppEvent::Psk(arg.trim().to_ascii_lowercase()),
            "DPP-FAIL"
            | "DPP-CONF-FAILED"
            | "DPP-AUTH-INIT-FAILED"
            | "DPP-NOT-COMPATIBLE"
            | "DPP-RESPONSE-PENDING"
            | "DPP-MISSING-AUTH" => {
                // The argument may quote what the peer sent: only the name is kept.
                DppEvent::Failed(name.to_string())
            }
            _ => DppEvent::Other,
        }
    }
}

/// Collects one configuration from its events. `feed` returns the network once complete,
/// checked by the portal's rules, or why it is refused. Never holds more than one.
#[derive(Default)]
pub(crate) struct Received {
    akm: Option<String>,
    ssid: Option<Vec<u8>>,
    active: bool,
}

impl Received {
    pub(crate) fn feed(&mut self, ev: DppEvent) -> Option<Result<NetworkInput, NetworkRefused>> {
        match ev {
            DppEvent::ConfReceived => {
                *self = Received {
                    active: true,
                    ..Default::default()
                };
                None
            }
            _ if !self.active => None,
            DppEvent::Akm(a) => {
                self.akm = Some(a);
                None
            }
            DppEvent::Ssid(s) => {
                self.ssid = Some(s.unwrap_or_default());
                None
            }
            DppEvent::Pass(p) => {
                let psk = p
                    .and_then(|p| String::from_utf8(p).ok())
                    .unwrap_or_default();
                Some(self.finish(psk))
            }
            DppEvent::Psk(p) => Some(self.finish(p)),
            DppEvent::Failed(_) | DppEvent::Other => None,
        }
    }

    fn finish(&mut self, psk: String) -> Result<NetworkInput, NetworkRefused> {
        let akm = self.akm.take().unwrap_or_default();
        let ssid = self.ssid.take().unwrap_or_default();
        self.active = false;
        // NetworkManager profiles here are WPA2-PSK (`nm::keyfile`): a WPA3-only (sae) or a
        // connector (dpp) network cannot be joined through them.
        if !akm.split('+').any(|a| a == "psk") {
            return Err(NetworkRefused::Akm(akm));
        }
        let ssid = String::from_utf8(ssid).map_err(|_| {
            NetworkRefused::Malformed("the SSID offered is not UTF-8: not supported".into())
        })?;
        super::portal::check_network(&ssid, &psk, false)?;
        Ok(NetworkInput {
            ssid,
            psk,
            eap: None,
        })
    }
}

/// An enrollee listening on one interface.
pub(crate) struct Enrollee {
    ctrl: Ctrl,
    bootstrap_id: String,
    pub uri: String,
    got: Received,
    /// An exchange ended without a network since the last `take_ended`.
    ended: bool,
    /// wpa_supplicant's log level before listening, to restore (see `quiet_logs`).
    restore_level: Option<String>,
}

/// wpa_supplicant logs its events to syslog at INFO (`-s`), `DPP-CONFOBJ-PASS <hex>` (the
/// network's pass key) included. While the enrollee listens its level is held at WARNING;
/// events still reach attached control sockets (their own level). Returns the level to
/// restore, if it was changed.
fn quiet_logs(ctrl: &mut Ctrl) -> Result<Option<String>, DppError> {
    let r = expect_ok(ctrl, "LOG_LEVEL")?;
    let level = r
        .lines()
        .find_map(|l| l.strip_prefix("Current level: "))
        .map(str::trim)
        .unwrap_or("");
    if !matches!(level, "EXCESSIVE" | "MSGDUMP" | "DEBUG" | "INFO") {
        return Ok(None);
    }
    expect_ok(ctrl, "LOG_LEVEL WARNING")?;
    Ok(Some(level.to_string()))
}

fn expect_ok(ctrl: &mut Ctrl, cmd: &str) -> Result<String, DppError> {
    let r = ctrl
        .request(cmd, REPLY_TIMEOUT)
        .map_err(|e| DppError::Ctrl(format!("wpa_supplicant {}: {e}", command_name(cmd))))?;
    let r = r.trim_end().to_string();
    if r.starts_with("FAIL") || r.starts_with("UNKNOWN COMMAND") {
        return Err(DppError::Refused(format!(
            "wpa_supplicant refused {}: {r} (built without DPP?)",
            command_name(cmd)
        )));
    }
    Ok(r)
}

impl Enrollee {
    /// Attaches to the interface's control socket, loads the bootstrap key, gets the URI
    /// and starts listening.
    pub(crate) fn start(ctrl_path: &Path, key: &[u8; 32]) -> Result<Enrollee, DppError> {
        let mut ctrl = Ctrl::open(ctrl_path)
            .map_err(|e| DppError::Ctrl(format!("{}: {e}", ctrl_path.display())))?;
        expect_ok(&mut ctrl, "ATTACH")?;
        let restore_level = quiet_logs(&mut ctrl)?;
        let mut e = Enrollee {
            ctrl,
            bootstrap_id: String::new(),
            uri: String::new(),
            got: Received::default(),
            ended: false,
            restore_level,
        };
        match e.bootstrap(key) {
            Ok(()) => Ok(e),
            Err(err) => {
                e.stop();
                Err(err)
            }
        }
    }

    fn bootstrap(&mut self, key: &[u8; 32]) -> Result<(), DppError> {
        let ctrl = &mut self.ctrl;
        expect_ok(ctrl, "SET dpp_config_processing 0")?;
        let id = expect_ok(ctrl, &bootstrap_gen_cmd(key))?;
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(DppError::Refused(format!(
                "wpa_supplicant DPP_BOOTSTRAP_GEN: unexpected reply {id:?}"
            )));
        }
        self.bootstrap_id = id;
        let uri = expect_ok(
            ctrl,
            &format!("DPP_BOOTSTRAP_GET_URI {}", self.bootstrap_id),
        )?;
        if !uri.starts_with("DPP:") || uri.len() > 1024 {
            return Err(DppError::Refused(
                "wpa_supplicant DPP_BOOTSTRAP_GET_URI: not a DPP URI".into(),
            ));
        }
        self.uri = uri;
        self.listen()
    }

    /// (Re)starts listening; wpa_supplicant answers OK when it already listens there.
    pub(crate) fn listen(&mut self) -> Result<(), DppError> {
        expect_ok(&mut self.ctrl, &format!("DPP_LISTEN {LISTEN_FREQ}")).map(drop)
    }

    /// Waits up to `timeout` for the next event; a complete configuration comes back checked.
    pub(crate) fn poll(
        &mut self,
        timeout: Duration,
    ) -> Option<Result<NetworkInput, NetworkRefused>> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self.ctrl.event(left).ok().flatten()?;
            let ev = DppEvent::parse(&line);
            if let DppEvent::Failed(why) = &ev {
                crate::info!("provisioning", "DPP exchange ended: {why}");
                self.ended = true;
            }
            if let Some(r) = self.got.feed(ev) {
                return Some(r);
            }
        }
    }

    /// Whether an exchange ended without a network since the last call: wpa_supplicant
    /// may have stopped listening, and a phone that tries again must find it listening.
    pub(crate) fn take_ended(&mut self) -> bool {
        std::mem::take(&mut self.ended)
    }

    pub(crate) fn stop(mut self) {
        let _ = expect_ok(&mut self.ctrl, "DPP_STOP_LISTEN");
        if !self.bootstrap_id.is_empty() {
            let _ = expect_ok(
                &mut self.ctrl,
                &format!("DPP_BOOTSTRAP_REMOVE {}", self.bootstrap_id),
            );
        }
        if let Some(level) = self.restore_level.take() {
            let _ = expect_ok(&mut self.ctrl, &format!("LOG_LEVEL {level}"));
        }
        let _ = expect_ok(&mut self.ctrl, "DETACH");
    }
}

/// The Wi-Fi interface wpa_supplicant controls in this network namespace: the first
/// control socket in `ctrl_dir` (sorted) naming an interface with a `phy80211`.
pub(crate) fn find_interface(ctrl_dir: &Path, sys_net: &Path) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(ctrl_dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !n.starts_with("p2p-") && sys_net.join(n).join("phy80211").exists())
        .collect();
    names.sort();
    names.into_iter().next()
}

/// Writes the URI and its QR codes (SVG and PNG, for the label) to `dir`, atomically.
pub(crate) fn publish(dir: &Path, uri: &str) -> Result<(), DppError> {
    let files = |at: &Path, e: std::io::Error| DppError::Files(format!("{}: {e}", at.display()));
    std::fs::create_dir_all(dir).map_err(|e| files(dir, e))?;
    let (svg, png) = super::qr::render(uri).map_err(|e| DppError::Files(e.to_string()))?;
    for (name, data) in [
        ("uri.txt", format!("{uri}\n").into_bytes()),
        ("qr.svg", svg.into_bytes()),
        ("qr.png", png),
    ] {
        let p = dir.join(name);
        crate::fsutil::atomic_write(&p, &data, 0o644).map_err(|e| files(&p, e))?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn scalars_outside_the_group_are_refused() {
        assert!(!valid_scalar(&[0; 32]));
        assert!(!valid_scalar(&P256_ORDER));
        assert!(!valid_scalar(&[0xff; 32]));
        let mut below = P256_ORDER;
        below[31] -= 1;
        assert!(valid_scalar(&below));
        assert!(valid_scalar(&[1; 32]));
    }

    #[test]
    fn the_key_is_rfc5915_der_on_p256() {
        let d = [7u8; 32];
        let der = key_der(&d);
        assert_eq!(der.len(), 2 + 0x31);
        assert_eq!(&der[..7], &[0x30, 0x31, 0x02, 0x01, 0x01, 0x04, 0x20]);
        assert_eq!(&der[7..39], &d);
        assert_eq!(
            &der[39..],
            &[0xa0, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07]
        );
        // No MAC: the URI (a label) must outlive the radio's random scan address.
        assert!(bootstrap_gen_cmd(&d)
            .starts_with("DPP_BOOTSTRAP_GEN type=qrcode chan=81/1 key=30310201010420"));
    }

    #[test]
    fn the_key_is_kept_0600_and_a_bad_key_file_is_an_error() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("svc-dpp-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = dir.join("dpp/bootstrap.key");
        let k = load_or_create_key(&p).unwrap();
        assert!(valid_scalar(&k));
        assert_eq!(
            load_or_create_key(&p).unwrap(),
            k,
            "same key on the next boot"
        );
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::write(&p, "00".repeat(32)).unwrap();
        let e = load_or_create_key(&p).unwrap_err().to_string();
        assert!(e.contains("not a DPP bootstrap key"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "00".repeat(32),
            "never replaced"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn printf_encoded_ssids_decode_literally() {
        assert_eq!(printf_decode("lab").unwrap(), b"lab");
        assert_eq!(
            printf_decode(r#"a\"b\\c\x00\xff\n"#).unwrap(),
            b"a\"b\\c\x00\xff\n"
        );
        assert_eq!(printf_decode("$(reboot);`x`").unwrap(), b"$(reboot);`x`");
        assert_eq!(printf_decode(r"\x4"), None);
        assert_eq!(printf_decode("bad\\"), None);
        assert_eq!(printf_decode(r"\q"), None);
    }

    fn feed_all(lines: &[&str]) -> Vec<Result<NetworkInput, NetworkRefused>> {
        let mut r = Received::default();
        lines
            .iter()
            .filter_map(|l| r.feed(DppEvent::parse(l)))
            .collect()
    }

    #[test]
    fn a_psk_network_is_received_and_checked_like_the_portal() {
        let pass = hex(b"lab password 1");
        let got = feed_all(&[
            "DPP-RX src=02:00:00:00:00:00 freq=2412 type=0",
            "DPP-CONF-RECEIVED",
            "DPP-CONFOBJ-AKM psk",
            r"DPP-CONFOBJ-SSID upstream\x20ap",
            &format!("DPP-CONFOBJ-PASS {pass}"),
        ]);
        assert_eq!(
            got,
            vec![Ok(NetworkInput {
                ssid: "upstream ap".into(),
                psk: "lab password 1".into(),
                eap: None,
            })]
        );
        let psk = "ab".repeat(32);
        let got = feed_all(&[
            "DPP-CONF-RECEIVED",
            "DPP-CONFOBJ-AKM psk+sae",
            "DPP-CONFOBJ-SSID x",
            &format!("DPP-CONFOBJ-PSK {psk}"),
        ]);
        assert_eq!(got[0].as_ref().unwrap().psk, psk);
    }

    #[test]
    fn bad_networks_over_dpp_are_refused_with_the_portals_messages() {
        let cases: &[(&[&str], &str)] = &[
            // Events without a DPP-CONF-RECEIVED first are ignored.
            (
                &[
                    "DPP-CONFOBJ-AKM psk",
                    "DPP-CONFOBJ-SSID x",
                    "DPP-CONFOBJ-PASS 3132333435363738",
                ],
                "",
            ),
            (
                &[
                    "DPP-CONF-RECEIVED",
                    "DPP-CONFOBJ-AKM sae",
                    "DPP-CONFOBJ-SSID x",
                    "DPP-CONFOBJ-PASS 3132333435363738",
                ],
                "only WPA2-PSK",
            ),
            (
                &[
                    "DPP-CONF-RECEIVED",
                    "DPP-CONFOBJ-AKM dpp",
                    "DPP-CONFOBJ-SSID x",
                    "DPP-CONFOBJ-PSK 00",
                ],
                "only WPA2-PSK",
            ),
            (
                &[
                    "DPP-CONF-RECEIVED",
                    "DPP-CONFOBJ-AKM psk",
                    "DPP-CONFOBJ-SSID x",
                    "DPP-CONFOBJ-PASS 31323334",
                ],
                "psk must",
            ),
            (
                &[
                    "DPP-CONF-RECEIVED",
                    "DPP-CONFOBJ-AKM psk",
                    "DPP-CONFOBJ-PASS 3132333435363738",
                ],
                "SSID",
            ),
            (
                &[
                    "DPP-CONF-RECEIVED",
                    "DPP-CONFOBJ-AKM psk",
                    &format!("DPP-CONFOBJ-SSID {}", "a".repeat(33)),
                    "DPP-CONFOBJ-PASS 3132333435363738",
                ],
                "SSID",
            ),
            (
                &[
                    "DPP-CONF-RECEIVED",
                    "DPP-CONFOBJ-AKM psk",
                    r"DPP-CONFOBJ-SSID \xff\xfe",
                    "DPP-CONFOBJ-PASS 3132333435363738",
                ],
                "UTF-8",
            ),
            (
                &[
                    "DPP-CONF-RECEIVED",
                    "DPP-CONFOBJ-AKM psk",
                    "DPP-CONFOBJ-SSID x",
                    "DPP-CONFOBJ-PASS 0a3132333435363738",
                ],
                "psk must",
            ),
            (
                &[
                    "DPP-CONF-RECEIVED",
                    "DPP-CONFOBJ-AKM psk",
                    "DPP-CONFOBJ-SSID x",
                    "DPP-CONFOBJ-PASS zz",
                ],
                "psk must",
            ),
        ];
        for (lines, want) in cases {
            let got = feed_all(lines);
            if want.is_empty() {
                assert!(got.is_empty(), "{lines:?}");
                continue;
            }
            assert_eq!(got.len(), 1, "{lines:?}");
            let e = got[0].as_ref().unwrap_err().to_string();
            assert!(
                e.to_lowercase().contains(&want.to_lowercase()),
                "{lines:?}: {e}"
            );
        }
    }

    #[test]
    fn the_interface_is_one_wpa_supplicant_controls_here() {
        let d = std::env::temp_dir().join(format!("svc-dpp-if-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        for n in [
            "ctrl/wlan1",
            "ctrl/wlan0",
            "ctrl/p2p-dev-wlan0",
            "ctrl/eth0",
        ] {
            std::fs::create_dir_all(d.join(n)).unwrap();
        }
        for n in [
            "sys/wlan0/phy80211",
            "sys/p2p-dev-wlan0/phy80211",
            "sys/eth0",
        ] {
            std::fs::create_dir_all(d.join(n)).unwrap();
        }
        assert_eq!(
            find_interface(&d.join("ctrl"), &d.join("sys")).as_deref(),
            Some("wlan0")
        );
        assert_eq!(find_interface(&d.join("none"), &d.join("sys")), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// What wpa_supplicant 2.10 sends an enrollee that receives the network "lab", pass key
    /// "secret-pass-1".
    pub(crate) fn handover_events() -> Vec<String> {
        vec![
            "DPP-AUTH-SUCCESS init=0".into(),
            "DPP-CONF-RECEIVED".into(),
            "DPP-CONFOBJ-AKM psk".into(),
            "DPP-CONFOBJ-SSID lab".into(),
            format!("DPP-CONFOBJ-PASS {}", hex(b"secret-pass-1")),
        ]
    }

    /// A stand-in wpa_supplicant on a real control socket: answers the enrollee's commands
    /// like 2.10 does and, after DPP_LISTEN, sends the events of a received configuration.
    pub(crate) fn stand_in(
        path: &Path,
        events: Vec<String>,
    ) -> std::thread::JoinHandle<Vec<String>> {
        let _ = std::fs::remove_file(path);
        let server = std::os::unix::net::UnixDatagram::bind(path).unwrap();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut b = [0u8; 4096];
            loop {
                let (n, from) = server.recv_from(&mut b).unwrap();
                let cmd = String::from_utf8_lossy(&b[..n]).to_string();
                let reply = match cmd.split(' ').next().unwrap() {
                    "LOG_LEVEL" if cmd == "LOG_LEVEL" => {
                        "Current level: INFO\nTimestamp: 0\n".to_string()
                    }
                    "DPP_BOOTSTRAP_GEN" => "1".to_string(),
                    "DPP_BOOTSTRAP_GET_URI" => "DPP:C:81/1;M:020000000100;V:2;K:MDkw;;".to_string(),
                    "DETACH" => {
                        seen.push(cmd);
                        server.send_to_addr(b"OK\n", &from).unwrap();
                        return seen;
                    }
                    _ => "OK\n".to_string(),
                };
                server.send_to_addr(reply.as_bytes(), &from).unwrap();
                if cmd.starts_with("DPP_LISTEN") {
                    for e in &events {
                        server
                            .send_to_addr(format!("<3>{e}").as_bytes(), &from)
                            .unwrap();
                    }
                }
                seen.push(cmd);
            }
        })
    }

    #[test]
    fn the_enrollee_drives_wpa_supplicant_and_hands_over_the_network() {
        let d = std::env::temp_dir().join(format!("svc-dpp-e2e-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let sock = d.join("wlan0");
        let t = stand_in(&sock, handover_events());
        let key = [9u8; 32];
        let mut e = Enrollee::start(&sock, &key).unwrap();
        assert!(e.uri.starts_with("DPP:C:81/1;"));
        let got = e.poll(Duration::from_secs(20)).unwrap().unwrap();
        assert_eq!(
            (got.ssid.as_str(), got.psk.as_str()),
            ("lab", "secret-pass-1")
        );
        e.stop();
        let seen = t.join().unwrap();
        let names: Vec<&str> = seen.iter().map(|c| command_name(c)).collect();
        assert_eq!(
            names,
            [
                "ATTACH",
                "LOG_LEVEL",
                "LOG_LEVEL",
                "SET",
                "DPP_BOOTSTRAP_GEN",
                "DPP_BOOTSTRAP_GET_URI",
                "DPP_LISTEN",
                "DPP_STOP_LISTEN",
                "DPP_BOOTSTRAP_REMOVE",
                "LOG_LEVEL",
                "DETACH"
            ]
        );
        // wpa_supplicant's syslog would carry the pass key (hex) at INFO: quiet while
        // listening, restored after.
        assert_eq!(
            (seen[2].as_str(), seen[9].as_str()),
            ("LOG_LEVEL WARNING", "LOG_LEVEL INFO")
        );
        assert_eq!(
            seen[3], "SET dpp_config_processing 0",
            "wpa_supplicant adds nothing itself"
        );
        assert!(seen[4].ends_with(&hex(&key_der(&key))));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_wpa_supplicant_without_dpp_is_a_clear_error_without_the_key() {
        let d = std::env::temp_dir().join(format!("svc-dpp-nodpp-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let sock = d.join("wlan0");
        let _ = std::fs::remove_file(&sock);
        let server = std::os::unix::net::UnixDatagram::bind(&sock).unwrap();
        let t = std::thread::spawn(move || {
            let mut b = [0u8; 4096];
            // ATTACH, LOG_LEVEL, SET, DPP_BOOTSTRAP_GEN, then the clean-up of a failed start.
            for _ in 0..6 {
                let (n, from) = server.recv_from(&mut b).unwrap();
                let r: &[u8] = if b[..n].starts_with(b"DPP_") {
                    b"UNKNOWN COMMAND\n"
                } else {
                    b"OK\n"
                };
                server.send_to_addr(r, &from).unwrap();
            }
        });
        let key = [0x5au8; 32];
        let err = Enrollee::start(&sock, &key).err().unwrap().to_string();
        assert!(
            err.contains("DPP_BOOTSTRAP_GEN") && err.contains("UNKNOWN COMMAND"),
            "{err}"
        );
        assert!(
            !err.contains(&hex(&key)),
            "the key never appears in an error"
        );
        t.join().unwrap();
        // Nobody listening at all.
        let err = Enrollee::start(&d.join("nothing"), &key)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("nothing"), "{err}");
        let _ = std::fs::remove_dir_all(&d);
    }
}

//! NetworkManager backend. Profiles are written as NM keyfiles (0600, atomic) and loaded with
//! `nmcli connection load FILE`, so no pass key ever appears in a process's argv; nmcli is run
//! with an argv vector, never through a shell.
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[derive(Debug)]
pub(crate) enum NmError {
    Io(std::io::Error),
    Nmcli { args: String, stderr: String },
}
impl fmt::Display for NmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NmError::Io(e) => write!(f, "NetworkManager: {e}"),
            NmError::Nmcli { args, stderr } => write!(f, "nmcli {args} failed: {stderr}"),
        }
    }
}
impl std::error::Error for NmError {}

/// What the provisioning logic needs from the network stack.
pub(crate) trait NetworkBackend {
    fn save_wifi(&mut self, p: &WifiProfile) -> Result<(), NmError>;
    fn up(&mut self, id: &str) -> Result<(), NmError>;
    fn down(&mut self, id: &str) -> Result<(), NmError>;
    /// Removes the profile (NetworkManager's and its keyfile).
    fn delete(&mut self, id: &str) -> Result<(), NmError>;
    /// Keeps the profile but never connects it on its own.
    fn disable(&mut self, id: &str) -> Result<(), NmError>;
    /// The profile NetworkManager is activating on a Wi-Fi device right now (associating,
    /// authenticating, getting an address), if any: the hotspot must not cut it short.
    fn connecting(&mut self) -> Option<String> {
        None
    }
}

/// The Wi-Fi connection being activated, from `nmcli -t -f TYPE,STATE,CONNECTION dev`
/// (terse: `:` separates, `\:` and `\\` escape; states such as `connecting (getting IP
/// configuration)`).
pub(crate) fn parse_connecting(out: &str) -> Option<String> {
    out.lines().find_map(|line| {
        let mut fields = vec![String::new()];
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    if let (Some(n), Some(f)) = (chars.next(), fields.last_mut()) {
                        f.push(n);
                    }
                }
                ':' => fields.push(String::new()),
                c => {
                    if let Some(f) = fields.last_mut() {
                        f.push(c);
                    }
                }
            }
        }
        match fields.as_slice() {
            [t, state, conn] if t == "wifi" && state.starts_with("connecting") => {
                Some(conn.clone())
            }
            _ => None,
        }
    })
}

#[derive(Clone, PartialEq, Eq)]
pub(crate) struct WifiProfile {
    pub id: String,
    pub ssid: String,
    pub psk: String,
    pub priority: i32,
    /// Access point in shared mode (the hotspot) rather than a client profile.
    pub hotspot: bool,
    /// A client profile for an access point that does not broadcast its SSID: NetworkManager
    /// probes for it by name (`hidden=true`), or it never sees it to join or rejoin.
    pub hidden: bool,
    pub ifname: Option<String>,
    /// 802.1X settings of an enterprise network (`psk` is then empty).
    pub eap: Option<crate::config::model::Eap>,
}

impl fmt::Debug for WifiProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "WifiProfile({}, ssid {:?}, prio {})",
            self.id, self.ssid, self.priority
        )
    }
}

/// GKeyFile string escaping (the psk is printable ASCII; every space becomes `\s`).
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            ' ' => o.push_str("\\s"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c => o.push(c),
        }
    }
    o
}

/// Render the keyfile. The SSID is written as a byte list so quotes, `;` and any byte are
/// stored literally. `files`: where an enterprise network's certificates were written.
pub(crate) fn keyfile(p: &WifiProfile, files: &super::eap::Files) -> String {
    let ssid: String = p.ssid.bytes().map(|b| format!("{b};")).collect();
    let mut k = format!(
        "[connection]\nid={}\ntype=wifi\nautoconnect={}\nautoconnect-priority={}\n",
        esc(&p.id),
        !p.hotspot,
        p.priority
    );
    if let Some(i) = &p.ifname {
        k.push_str(&format!("interface-name={}\n", esc(i)));
    }
    // An AP needs a band and channel (NetworkManager's own `nmcli dev wifi hotspot` sets
    // them too); channel 1 of 2.4 GHz is allowed in every regulatory domain.
    let radio = if p.hotspot {
        "band=bg\nchannel=1\n"
    } else if p.hidden {
        "hidden=true\n"
    } else {
        ""
    };
    let security = match &p.eap {
        Some(eap) if !p.hotspot => super::eap::keyfile_sections(eap, files, esc),
        _ => format!(
            "\n[wifi-security]\nkey-mgmt=wpa-psk\nproto=rsn\npairwise=ccmp\ngroup=ccmp\npsk={}\n",
            esc(&p.psk)
        ),
    };
    k.push_str(&format!(
        "\n[wifi]\nmode={}\n{radio}ssid={ssid}\n{security}\n[ipv4]\nmethod={}\n",
        if p.hotspot { "ap" } else { "infrastructure" },
        if p.hotspot { "shared" } else { "auto" }
    ));
    if p.hotspot {
        k.push_str("address1=10.42.0.1/24\nnever-default=true\n\n[ipv6]\nmethod=disabled\n");
    } else {
        k.push_str("\n[ipv6]\nmethod=auto\n");
    }
    k
}

/// The id of a network entered in the portal.
pub(crate) fn user_id(ssid: &str) -> String {
    format!("user-{ssid}")
}

/// The id of a network from a config (or the manufacturer's defaults). Ids of each kind have
/// their own prefix (`net-`, `user-`, the hotspot's `svc-hotspot`), so no SSID can name
/// another kind's profile.
pub(crate) fn config_id(ssid: &str) -> String {
    format!("net-{ssid}")
}

/// Profile file name: `svc-` and the id with every byte outside `[A-Za-z0-9-]` written as
/// `_XX` (hex). Injective (`_` only ever starts an escape), so `Lab WiFi` and `Lab.WiFi`
/// get files of their own, and plain names stay readable (`svc-user-lab-home`).
pub(crate) fn keyfile_name(id: &str) -> String {
    let mut s = String::with_capacity(id.len() + 20);
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("_{b:02X}"));
        }
    }
    format!("svc-{s}.nmconnection")
}

/// The id a keyfile name stands for (the inverse of `keyfile_name`); `None` for a name it
/// cannot have made.
pub(crate) fn id_from_keyfile_name(name: &str) -> Option<String> {
    let enc = name.strip_prefix("svc-")?.strip_suffix(".nmconnection")?;
    let b = enc.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'_' {
            out.push(crate::encoding::hex_byte(b.get(i + 1..i + 3)?)?);
            i += 3;
        } else if b[i].is_ascii_alphanumeric() || b[i] == b'-' {
            out.push(b[i]);
            i += 1;
        } else {
            return None;
        }
    }
    let id = String::from_utf8(out).ok()?;
    (keyfile_name(&id) == name).then_some(id)
}

/// Why an activation failed, in words for the status, from nmcli's error (NetworkManager's
/// device state reasons). 802.1X failures cannot be told apart further from here: the
/// supplicant's own events name the certificate problem.
pub(crate) fn failure_reason(err: &str) -> &'static str {
    let e = err.to_ascii_lowercase();
    // wpa_supplicant's events (`eap::Watch`) first: nmcli's own words are the same for all.
    if e.contains("eap-tls-cert-error") || e.contains("local tls alert") {
        "the server's certificate is not trusted (not signed by ca_cert, or its name does not match domain)"
    } else if e.contains("remote tls alert") && e.contains("expired")
        || e.contains("client certificate expired")
    {
        "the client certificate has expired (the network refuses it)"
    } else if e.contains("client certificate not valid yet") {
        "the client certificate is not valid yet (is the clock right?)"
    } else if e.contains("remote tls alert") {
        "the network refused the client certificate"
    } else if e.contains("eap-failure") || e.contains("password for '802-1x") {
        "the network refused the 802.1X user name or password"
    } else if e.contains("secrets were required") || e.contains("no-secrets") {
        "the network refused the credentials (a wrong pass key, or the 802.1X user name or password)"
    } else if e.contains("supplicant failed") || e.contains("supplicant-failed") {
        "802.1X authentication failed (the server's certificate not trusted by ca_cert or domain, or the client certificate refused or expired)"
    } else if e.contains("supplicant took too long") || e.contains("supplicant-timeout") {
        "802.1X authentication timed out"
    } else if e.contains("no network with ssid") || e.contains("not found") {
        "the network is not in range"
    } else if e.contains("ip configuration") || e.contains("dhcp") {
        "no address from the network (DHCP)"
    } else {
        "the connection could not be activated"
    }
}

/// Deadline of an nmcli that only reads state (devices, connectivity).
pub(crate) const NMCLI_QUERY: Duration = Duration::from_secs(15);
/// Deadline of a scan with `--rescan yes`.
pub(crate) const NMCLI_SCAN: Duration = Duration::from_secs(45);
/// Deadline of a change: `connection up` waits up to 90 s for an activation by itself.
const NMCLI_CHANGE: Duration = Duration::from_secs(120);

/// `program args…` through the one process runner: argv only (no secret ever goes in it:
/// pass keys travel in keyfiles), and a deadline, so that a wedged NetworkManager cannot
/// wedge provisioning.
pub(crate) fn nmcli(
    program: &Path,
    args: &[&str],
    timeout: Duration,
) -> Result<crate::process::Output, crate::process::RunError> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    crate::process::run(cmd, timeout)
}

/// Whether NetworkManager manages a Wi-Fi device (false when nmcli is missing too).
pub(crate) fn wifi_device_present() -> bool {
    nmcli(
        Path::new("nmcli"),
        &["-t", "-f", "TYPE", "dev"],
        NMCLI_QUERY,
    )
    .map(|o| {
        o.success()
            && String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l == "wifi")
    })
    .unwrap_or(false)
}

pub(crate) struct Nmcli {
    pub connections_dir: PathBuf,
    /// Certificates and keys of enterprise networks (`eap::dir`).
    pub eap_dir: PathBuf,
    /// `nmcli`, or a stand-in in tests.
    pub program: PathBuf,
    /// wpa_supplicant's control sockets and the kernel's interfaces (`eap::Watch`).
    pub wpa_ctrl_dir: PathBuf,
    pub sys_net: PathBuf,
}

impl Nmcli {
    pub(crate) fn new(connections_dir: PathBuf, eap_dir: PathBuf) -> Nmcli {
        Nmcli {
            connections_dir,
            eap_dir,
            program: PathBuf::from("nmcli"),
            wpa_ctrl_dir: PathBuf::from(super::dpp_thread::WPA_CTRL_DIR),
            sys_net: PathBuf::from("/sys/class/net"),
        }
    }

    fn run(&self, args: &[&str]) -> Result<(), NmError> {
        let out = nmcli(&self.program, args, NMCLI_CHANGE)
            .map_err(|e| NmError::Io(std::io::Error::other(e.to_string())))?;
        if out.success() {
            Ok(())
        } else {
            Err(NmError::Nmcli {
                args: args.join(" "),
                stderr: out.stderr_text(),
            })
        }
    }
}

impl NetworkBackend for Nmcli {
    fn save_wifi(&mut self, p: &WifiProfile) -> Result<(), NmError> {
        // No scrubber registration here: a config's keys were registered when it was
        // checked, and a key from the portal must not be (see `logging::register_secret`).
        let path: PathBuf = self.connections_dir.join(keyfile_name(&p.id));
        let files = match &p.eap {
            Some(eap) => super::eap::write_files(&self.eap_dir, &p.id, eap).map_err(|e| {
                NmError::Io(std::io::Error::new(
                    e.kind(),
                    format!("certificates in {}: {e}", self.eap_dir.display()),
                ))
            })?,
            None => Default::default(),
        };
        crate::fsutil::atomic_write(&path, keyfile(p, &files).as_bytes(), 0o600)
            .map_err(NmError::Io)?;
        let file: &Path = &path;
        self.run(&["connection", "load", &file.to_string_lossy()])
    }
    fn up(&mut self, id: &str) -> Result<(), NmError> {
        // nmcli says "Secrets were required" for a wrong 802.1X password, an untrusted
        // server certificate and an expired client certificate alike: wpa_supplicant's
        // events during the activation tell them apart (`failure_reason`).
        // wpa_supplicant knows a refusal at once; NetworkManager holds the activation until
        // its 802.1X timeout (25 s, then "Secrets were required"): the watch cuts it short,
        // so the next network is tried at once. Still one failed `up`, one failure counted.
        let (program, target) = (self.program.clone(), id.to_string());
        let abort: super::eap::OnRefused = Box::new(move || {
            crate::info!(
                "provisioning",
                "{target:?}: wpa_supplicant reports the 802.1X authentication failed: activation stopped"
            );
            if let Err(e) = nmcli(
                &program,
                &["connection", "down", "id", &target],
                NMCLI_CHANGE,
            ) {
                crate::warn!("provisioning", "stopping the activation of {target:?}: {e}");
            }
        });
        let watch = super::eap::Watch::start(&self.wpa_ctrl_dir, &self.sys_net, abort);
        let r = self.run(&["-w", "60", "connection", "up", "id", id]);
        let events = watch.map(super::eap::Watch::finish).unwrap_or_default();
        match r {
            Err(NmError::Nmcli { args, mut stderr }) => {
                if !events.is_empty() {
                    stderr.push_str(&format!("; wpa_supplicant: {}", events.join("; ")));
                }
                if let Some(why) = super::eap::client_cert_problem(
                    &self.eap_dir,
                    id,
                    crate::logging::now_ms() / 1000,
                ) {
                    stderr.push_str(&format!("; {why}"));
                }
                Err(NmError::Nmcli { args, stderr })
            }
            r => r,
        }
    }
    fn down(&mut self, id: &str) -> Result<(), NmError> {
        self.run(&["connection", "down", "id", id])
    }
    fn disable(&mut self, id: &str) -> Result<(), NmError> {
        self.run(&[
            "connection",
            "modify",
            "id",
            id,
            "connection.autoconnect",
            "no",
        ])
    }
    fn connecting(&mut self) -> Option<String> {
        let out = nmcli(
            &self.program,
            &["-t", "-f", "TYPE,STATE,CONNECTION", "dev"],
            NMCLI_QUERY,
        )
        .ok()
        .filter(|o| o.success())?;
        parse_connecting(&String::from_utf8_lossy(&out.stdout))
    }
    fn delete(&mut self, id: &str) -> Result<(), NmError> {
        let r = self.run(&["connection", "delete", "id", id]);
        // NetworkManager removes the file it loaded; a profile it never loaded leaves it.
        match std::fs::remove_file(self.connections_dir.join(keyfile_name(id))) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(NmError::Io(e)),
            _ => {}
        }
        super::eap::remove_files(&self.eap_dir, id).map_err(NmError::Io)?;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyfile_stores_hostile_values_literally() {
        let p = WifiProfile {
            id: "home".into(),
            ssid: "a;\"$(x)".into(),
            psk: " p\\w $(reboot)".into(),
            priority: 10,
            hotspot: false,
            hidden: false,
            eap: None,
            ifname: None,
        };
        let k = keyfile(&p, &Default::default());
        assert!(k.contains("ssid=97;59;34;36;40;120;41;\n"));
        assert!(k.contains("psk=\\sp\\\\w\\s$(reboot)\n"));
        assert!(k.contains("autoconnect-priority=10\n"));
        assert!(!format!("{p:?}").contains("reboot"), "psk not in Debug");
        assert!(
            !k.contains("hidden="),
            "a visible network sends no probes by name"
        );
    }

    /// comitup #24: a network whose access point hides its SSID is never joined nor rejoined
    /// unless NetworkManager probes for it by name.
    #[test]
    fn a_hidden_network_is_probed_for_by_name() {
        let n = crate::config::model::Network {
            net_type: "wifi".into(),
            ssid: "attic".into(),
            psk: Some("password1".into()),
            priority: 1,
            hidden: true,
            eap: None,
            extra: Default::default(),
        };
        let k = keyfile(
            &crate::provisioning::client_profile(&n),
            &Default::default(),
        );
        let wifi = k
            .split("[wifi]\n")
            .nth(1)
            .unwrap()
            .split("\n[")
            .next()
            .unwrap();
        assert!(wifi.lines().any(|l| l == "hidden=true"), "{k}");
    }

    #[test]
    fn connecting_is_read_from_nmcli_dev() {
        let out = "ethernet:unavailable:\nwifi:connecting (getting IP configuration):net-a\\:b\nloopback:connected (externally):lo\n";
        assert_eq!(parse_connecting(out).as_deref(), Some("net-a:b"));
        let out = "wifi:connecting (need authentication):user-home\n";
        assert_eq!(parse_connecting(out).as_deref(), Some("user-home"));
        for idle in [
            "wifi:disconnected:\n",
            "wifi:connected:net-home\n",
            "wifi:unavailable:\n",
            "",
        ] {
            assert_eq!(parse_connecting(idle), None, "{idle}");
        }
    }

    #[test]
    fn hotspot_is_wpa2_shared() {
        let p = WifiProfile {
            id: "svc-hotspot".into(),
            ssid: "svc-setup-box".into(),
            psk: "password1".into(),
            priority: 0,
            hotspot: true,
            hidden: false,
            eap: None,
            ifname: Some("wlan0".into()),
        };
        let k = keyfile(&p, &Default::default());
        for want in [
            "mode=ap",
            "key-mgmt=wpa-psk",
            "method=shared",
            "autoconnect=false",
        ] {
            assert!(k.contains(want), "{want}");
        }
        assert!(!keyfile_name("a/../b c").contains('/'));
    }

    /// `Lab WiFi` and `Lab.WiFi` shared one keyfile; a config SSID `svc-hotspot` was the
    /// hotspot's id and file. Names are injective now, and each kind has its own namespace.
    #[test]
    fn keyfile_names_and_ids_never_collide() {
        use crate::provisioning::driver::HOTSPOT_ID;
        let ssids = [
            "Lab WiFi",
            "Lab.WiFi",
            "Lab_WiFi",
            "Lab_20WiFi",
            "svc-hotspot",
            "hotspot",
            "user-home",
            "home",
            "net-home",
            "a/../b",
            "ä",
            "_",
            "-",
            "a_2Fb",
            "a/b",
        ];
        let mut ids = vec![HOTSPOT_ID.to_string()];
        for s in ssids {
            let n = crate::config::model::Network {
                net_type: "wifi".into(),
                ssid: s.into(),
                psk: None,
                priority: 0,
                hidden: false,
                eap: None,
                extra: Default::default(),
            };
            ids.push(crate::provisioning::client_profile(&n).id);
            ids.push(user_id(s));
        }
        let names: std::collections::HashSet<String> =
            ids.iter().map(|i| keyfile_name(i)).collect();
        let unique: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "ids: {ids:?}");
        assert_eq!(names.len(), ids.len(), "names: {names:?}");
        for n in &names {
            let stem = n.strip_suffix(".nmconnection").unwrap();
            assert!(
                stem.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)),
                "{n}"
            );
        }
        assert_eq!(
            keyfile_name(&user_id("lab-home")),
            "svc-user-lab-home.nmconnection"
        );
    }

    #[test]
    fn activation_failures_are_named() {
        for (err, want) in [
            ("Error: Connection activation failed: Secrets were required, but not provided", "user name or password"),
            ("Error: Connection activation failed: 802.1X supplicant failed", "certificate"),
            ("Error: Connection activation failed: 802.1X supplicant took too long to authenticate", "timed out"),
            ("Error: No network with SSID 'corp' found.", "not in range"),
            ("Error: Connection activation failed: IP configuration could not be reserved", "DHCP"),
            ("Error: something else", "could not be activated"),
        ] {
            assert!(failure_reason(err).contains(want), "{err}");
        }
    }
}

//! Enterprise Wi-Fi (#45): a network's `eap` settings, each bad input at its JSON pointer
//! with the schema agreeing, and no secret of them in `svc-agent validate`'s output.
use serde_json::{json, Value};
use svc::config::parse_value;

const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBCERT\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIKEY\n-----END PRIVATE KEY-----\n";
const AT: &str = "/agent/agent-provisioning/networks/0";

fn config(net: Value) -> Value {
    json!({"agent": {"agent-provisioning": {"networks": [net]}}})
}

fn peap() -> Value {
    json!({"ssid": "corp", "eap": {"method": "peap", "identity": "alice@example.org",
        "password": "Winter-2026!", "domain": "radius.example.org"}})
}

fn schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/machine-config.schema.json"
    ))
    .unwrap();
    jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
}

#[test]
fn tls_peap_and_ttls_entries_are_accepted_by_validator_and_schema() {
    let nets = [
        peap(),
        json!({"ssid": "lab", "priority": 3, "eap": {"method": "tls", "identity": "box-17",
            "ca_cert": CERT, "client_cert": CERT, "private_key": KEY,
            "private_key_password": "kp-1234"}}),
        json!({"ssid": "uni", "eap": {"method": "ttls", "identity": "s123", "password": "pw-5678",
            "phase2": "pap", "anonymous_identity": "anon@uni.example", "ca_cert": CERT,
            "domain": "uni.example"}}),
    ];
    for net in nets {
        let v = config(net.clone());
        let (cfg, report) = parse_value(&v).unwrap_or_else(|r| panic!("{net}: {r}"));
        assert!(report.warnings.is_empty(), "{net}: {report}");
        let n = &cfg.agent.provisioning.networks[0];
        assert!(n.eap.is_some() && n.psk.is_none(), "{net}");
        let errs: Vec<String> = schema().iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errs.is_empty(), "schema rejects {net}: {errs:?}");
        // Debug (what a log line of the config would print) holds no secret.
        let dbg = format!("{cfg:?}");
        for secret in ["Winter-2026!", "kp-1234", "MIIKEY", "pw-5678"] {
            assert!(!dbg.contains(secret), "{secret} in {dbg}");
        }
    }
}

#[test]
fn every_bad_eap_input_is_named_at_its_pointer_and_the_schema_agrees() {
    // (change to the PEAP network's eap (null removes), pointer under the network, message)
    let cases: &[(&str, Value, &str, &str)] = &[
        ("method", json!("leap"), "/eap/method", "not supported"),
        ("method", Value::Null, "/eap/method", "required"),
        ("identity", Value::Null, "/eap/identity", "required"),
        ("identity", json!("a\nb"), "/eap/identity", "control"),
        ("identity", json!(""), "/eap/identity", "1 to 253"),
        (
            "password",
            Value::Null,
            "/eap/password",
            "required with method \"peap\"",
        ),
        ("password", json!(""), "/eap/password", "1 to 256"),
        (
            "password",
            json!(12345678),
            "/eap/password",
            "expected a string",
        ),
        (
            "phase2",
            json!("pap"),
            "/eap/phase2",
            "not offered with \"peap\"",
        ),
        ("domain", json!("not a domain"), "/eap/domain", "DNS name"),
        ("domain", Value::Null, "/eap", "the server must be checked"),
        ("ca_cert", json!("hello"), "/eap/ca_cert", "PEM certificate"),
        (
            "client_cert",
            json!(CERT),
            "/eap/client_cert",
            "not used with method \"peap\"",
        ),
        (
            "private_key",
            json!(KEY),
            "/eap/private_key",
            "not used with method \"peap\"",
        ),
    ];
    let s = schema();
    for (key, new, path, msg) in cases {
        let mut net = peap();
        let eap = net["eap"].as_object_mut().unwrap();
        if new.is_null() {
            eap.remove(*key);
        } else {
            eap.insert(key.to_string(), new.clone());
        }
        let v = config(net);
        let report = parse_value(&v).expect_err(&format!("{key} = {new} accepted"));
        let want = format!("{AT}{path}");
        assert!(
            report
                .errors
                .iter()
                .any(|e| e.path == want && e.message.contains(msg)),
            "{key} = {new}: want {want} ~ {msg:?}, got:\n{report}"
        );
        assert!(!s.is_valid(&v), "schema accepts {key} = {new}");
        assert!(!report.to_string().contains("Winter-2026!"), "{report}");
    }
    // EAP-TLS without its key, with a password; psk beside eap; eap not an object.
    let tls = json!({"ssid": "lab", "eap": {"method": "tls", "identity": "box",
        "ca_cert": CERT, "client_cert": CERT, "password": "pw-5678"}});
    let mut psk_too = peap();
    psk_too["psk"] = json!("password123");
    let more: &[(Value, &str, &str)] = &[
        (
            tls.clone(),
            "/eap/private_key",
            "required with method \"tls\"",
        ),
        (tls, "/eap/password", "not used with method \"tls\""),
        (psk_too, "/psk", "takes no psk"),
        (
            json!({"ssid": "x", "eap": "peap"}),
            "/eap",
            "must be an object",
        ),
    ];
    for (net, path, msg) in more {
        let v = config(net.clone());
        let report = parse_value(&v).expect_err(&format!("{net} accepted"));
        let want = format!("{AT}{path}");
        assert!(
            report
                .errors
                .iter()
                .any(|e| e.path == want && e.message.contains(msg)),
            "{net}: want {want} ~ {msg:?}, got:\n{report}"
        );
        assert!(!s.is_valid(&v), "schema accepts {net}");
    }
}

/// `svc-agent validate --json` on a config with a bad enterprise entry: the error names the
/// place, and neither the password nor the key appears anywhere in what it prints.
#[test]
fn validate_never_prints_an_eap_secret() {
    let dir = std::env::temp_dir().join(format!("svc-eap-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cfg.json");
    let net = json!({"ssid": "lab", "eap": {"method": "tls", "identity": "box",
        "client_cert": CERT, "private_key": KEY, "private_key_password": "kp-secret-99",
        "password": "Winter-2026!"}});
    std::fs::write(&file, config(net).to_string()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_svc-agent"))
        .args(["validate", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(&format!("{AT}/eap/password")), "{text}");
    assert!(text.contains("the server must be checked"), "{text}");
    for secret in ["Winter-2026!", "kp-secret-99", "MIIKEY"] {
        assert!(!text.contains(secret), "{secret} printed: {text}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

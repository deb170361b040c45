//! The Improv button in the provisioning attributes (#45): what the manufacturer may name,
//! each bad input at its JSON pointer, the schema agreeing.
use serde_json::{json, Value};
use svc::config::parse_value;

const AT: &str = "/agent/agent-provisioning/attributes/improv_button";

fn config(button: Value) -> Value {
    json!({"agent": {"agent-provisioning": {"attributes": {"improv_button": button}}}})
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
fn a_button_by_path_or_name_with_a_key_code_or_name() {
    let s = schema();
    for (b, key) in [
        (
            json!({"device": "/dev/input/by-path/platform-gpio-keys-event", "key": "KEY_WPS_BUTTON"}),
            0x211,
        ),
        (json!({"name": "gpio-keys", "key": 256}), 256),
    ] {
        let v = config(b.clone());
        let (cfg, report) = parse_value(&v).unwrap_or_else(|r| panic!("{b}: {r}"));
        assert!(report.warnings.is_empty(), "{report}");
        assert_eq!(
            cfg.agent.provisioning.attributes.improv_button.unwrap().key,
            key
        );
        assert!(s.is_valid(&v), "schema rejects {b}");
    }
}

#[test]
fn bad_buttons_are_named_at_their_pointer() {
    let s = schema();
    let cases: &[(Value, &str, &str)] = &[
        (
            json!({"device": "/etc/shadow", "key": 28}),
            "/device",
            "under /dev/input/",
        ),
        (json!({"key": 28}), "", "exactly one of device and name"),
        (
            json!({"device": "/dev/input/event0", "name": "x", "key": 28}),
            "",
            "exactly one",
        ),
        (json!({"name": "gpio-keys"}), "/key", "required"),
        (
            json!({"name": "gpio-keys", "key": 0}),
            "/key",
            "out of range",
        ),
        (
            json!({"name": "gpio-keys", "key": 768}),
            "/key",
            "out of range",
        ),
        (
            json!({"name": "gpio-keys", "key": "KEY_NOPE"}),
            "/key",
            "not known",
        ),
        (json!({"name": "", "key": 28}), "/name", "1 to 255"),
    ];
    for (b, path, msg) in cases {
        let v = config(b.clone());
        let report = parse_value(&v).expect_err(&format!("{b} accepted"));
        let want = format!("{AT}{path}");
        assert!(
            report
                .errors
                .iter()
                .any(|e| e.path == want && e.message.contains(msg)),
            "{b}: want {want} ~ {msg:?}, got:\n{report}"
        );
        assert!(!s.is_valid(&v), "schema accepts {b}");
    }
}

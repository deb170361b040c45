//! Every validation rule of the machine config, valid and invalid, each asserting the JSON
//! pointer and the substance of the message; plus the JSON Schema's agreement.
use serde_json::{json, Value};
use svc::config::{parse_str, parse_value};

/// A valid base config that each case breaks in one place.
fn base() -> Value {
    json!({
        "components": [
            {"name": "board-1", "model": "acme:board:pi", "type": "board", "namespace": "rdk"},
            {"name": "sensor-1", "model": "acme:sensors:sr04", "type": "sensor", "namespace": "rdk",
             "attributes": {"board": "board-1", "timeout_ms": 1000}, "depends_on": ["board-1"]}
        ],
        "modules": [
            {"type": "registry", "name": "acme_board", "module_id": "acme:board", "version": "1.2.3"},
            {"type": "registry", "name": "acme_sensors", "module_id": "acme:sensors", "version": "latest",
             "env": {"PATH": "/opt/bin:${environment.PATH}"}},
            {"type": "local", "name": "lab_tool", "module_id": "lab:tool", "executable_path": "/opt/lab/tool"}
        ],
        "agent": {
            "svc-agent": {"release_channel": "stable"},
            "svc-server": {"release_channel": "latest", "attributes": {"fast_start": true}},
            "agent-provisioning": {"networks": [{"type": "wifi", "ssid": "home", "psk": "password123", "priority": 5}]},
            "agent-syscfg": {"attributes": {"logging": {"system_max_use": "512M"}, "upgrades": {"type": "all"}}}
        }
    })
}

fn set(v: &mut Value, pointer: &str, new: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = v
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no {parent}"));
    match target {
        Value::Object(m) => {
            if new.is_null() {
                m.remove(key);
            } else {
                m.insert(key.to_string(), new);
            }
        }
        Value::Array(a) => {
            let i: usize = key.parse().unwrap();
            if i == a.len() {
                a.push(new)
            } else {
                a[i] = new
            }
        }
        _ => panic!("{parent} is not a container"),
    }
}

/// (pointer to change, new value or null to remove, expected error path, message substring)
const CASES: &[(&str, &str, &str, &str)] = &[
    // required fields and types
    (
        "/components/0/name",
        "null",
        "/components/0/name",
        "required field is missing",
    ),
    (
        "/components/0/name",
        "\"\"",
        "/components/0/name",
        "must not be empty",
    ),
    (
        "/components/0/type",
        "5",
        "/components/0/type",
        "expected a string, found a number",
    ),
    (
        "/components/0/namespace",
        "null",
        "/components/0/namespace",
        "required",
    ),
    (
        "/components/0/attributes",
        "[]",
        "/components/0/attributes",
        "must be an object",
    ),
    ("/components", "{}", "/components", "expected an array"),
    (
        "/modules/0/module_id",
        "null",
        "/modules/0/module_id",
        "required",
    ),
    ("/agent", "[]", "/agent", "must be an object"),
    (
        "/agent/svc-server/disable_subsystem",
        "\"yes\"",
        "/agent/svc-server/disable_subsystem",
        "expected a boolean",
    ),
    (
        "/agent/svc-server/attributes/fast_start",
        "1",
        "/agent/svc-server/attributes/fast_start",
        "expected a boolean",
    ),
    // model triplet and its module
    (
        "/components/0/model",
        "\"acme:board\"",
        "/components/0/model",
        "triplet",
    ),
    (
        "/components/0/model",
        "\"acme:board:pi:x\"",
        "/components/0/model",
        "triplet",
    ),
    (
        "/components/0/model",
        "\"acme::pi\"",
        "/components/0/model",
        "triplet",
    ),
    (
        "/components/0/model",
        "\"other:board:pi\"",
        "/components/0/model",
        "no module declares module_id \"other:board\"",
    ),
    // module_id, type, local module needs
    (
        "/modules/0/module_id",
        "\"acme\"",
        "/modules/0/module_id",
        "<namespace or UUID>:<module name>",
    ),
    (
        "/modules/0/module_id",
        "\"a:b:c\"",
        "/modules/0/module_id",
        "<namespace or UUID>:<module name>",
    ),
    // Names that become folders (SVC_MODULE_DATA, the registry's packages/<name>, removed
    // recursively) must not climb or stay put.
    (
        "/modules/0/name",
        "\"..\"",
        "/modules/0/name",
        "names a folder",
    ),
    (
        "/modules/0/name",
        "\".\"",
        "/modules/0/name",
        "names a folder",
    ),
    (
        "/modules/0/module_id",
        "\"..:board\"",
        "/modules/0/module_id",
        "<namespace or UUID>:<module name>",
    ),
    (
        "/modules/0/type",
        "\"docker\"",
        "/modules/0/type",
        "expected \"registry\" or \"local\"",
    ),
    (
        "/modules/2/executable_path",
        "null",
        "/modules/2/executable_path",
        "local module needs executable_path",
    ),
    (
        "/modules/2/executable_path",
        "\"run.sh\"",
        "/modules/2/executable_path",
        "absolute path",
    ),
    (
        "/modules/0/name",
        "\"a/b\"",
        "/modules/0/name",
        "only letters, digits",
    ),
    // version selectors
    (
        "/modules/0/version",
        "null",
        "/modules/0/version",
        "required",
    ),
    (
        "/modules/0/version",
        "\"1.2\"",
        "/modules/0/version",
        "expected X.Y.Z, X.Y.*, X.*, latest",
    ),
    (
        "/modules/0/version",
        "\"v1.2.3\"",
        "/modules/0/version",
        "invalid version selector",
    ),
    (
        "/modules/0/version",
        "\"1.*.*\"",
        "/modules/0/version",
        "invalid version selector",
    ),
    (
        "/modules/0/version",
        "\"newest\"",
        "/modules/0/version",
        "invalid version selector",
    ),
    // depends_on
    (
        "/components/1/depends_on/0",
        "\"ghost\"",
        "/components/1/depends_on/0",
        "not a component of this config",
    ),
    (
        "/components/1/depends_on/0",
        "\"sensor-1\"",
        "/components/1/depends_on/0",
        "cannot depend on itself",
    ),
    (
        "/components/1/depends_on/0",
        "7",
        "/components/1/depends_on/0",
        "expected a component name",
    ),
    (
        "/components/0/depends_on",
        "[\"sensor-1\"]",
        "/components/0/depends_on",
        "dependency cycle",
    ),
    // duplicates
    (
        "/components/1/name",
        "\"board-1\"",
        "/components/1/name",
        "duplicate component name \"board-1\" (also /components/0)",
    ),
    (
        "/modules/1/name",
        "\"acme_board\"",
        "/modules/1/name",
        "duplicate module name",
    ),
    (
        "/modules/1/module_id",
        "\"acme:board\"",
        "/modules/1/module_id",
        "declared twice",
    ),
    // release channels per subsystem
    (
        "/agent/svc-agent/release_channel",
        "\"latest\"",
        "/agent/svc-agent/release_channel",
        "expected \"stable\"",
    ),
    (
        "/agent/svc-server/release_channel",
        "\"beta\"",
        "/agent/svc-server/release_channel",
        "expected \"stable\" or \"latest\"",
    ),
    // pins
    (
        "/agent/svc-server/pin_version",
        "\"1.2\"",
        "/agent/svc-server/pin_version",
        "not a semantic version",
    ),
    (
        "/agent/svc-agent/pin_version",
        "\"latest\"",
        "/agent/svc-agent/pin_version",
        "not a semantic version",
    ),
    (
        "/agent/svc-server/pin_url",
        "\"ftp://x/y\"",
        "/agent/svc-server/pin_url",
        "must start with https://",
    ),
    (
        "/agent/svc-server/pin_url",
        "\"https:///path\"",
        "/agent/svc-server/pin_url",
        "has no host",
    ),
    (
        "/agent/svc-server/pin_url",
        "\"file://rel/path\"",
        "/agent/svc-server/pin_url",
        "absolute path",
    ),
    (
        "/agent/svc-server/pin_url",
        "\"https://a b\"",
        "/agent/svc-server/pin_url",
        "spaces",
    ),
    // networks
    (
        "/agent/agent-provisioning/networks/0/type",
        "\"ethernet\"",
        "/agent/agent-provisioning/networks/0/type",
        "expected \"wifi\"",
    ),
    (
        "/agent/agent-provisioning/networks/0/ssid",
        "\"\"",
        "/agent/agent-provisioning/networks/0/ssid",
        "1 to 32 bytes",
    ),
    (
        "/agent/agent-provisioning/networks/0/ssid",
        "\"123456789012345678901234567890123\"",
        "/agent/agent-provisioning/networks/0/ssid",
        "1 to 32 bytes (found 33)",
    ),
    (
        "/agent/agent-provisioning/networks/0/ssid",
        "\"ééééééééééééééééé\"",
        "/agent/agent-provisioning/networks/0/ssid",
        "found 34",
    ),
    (
        "/agent/agent-provisioning/networks/0/psk",
        "\"short\"",
        "/agent/agent-provisioning/networks/0/psk",
        "8 to 63",
    ),
    (
        "/agent/agent-provisioning/networks/0/psk",
        "\"0123456789012345678901234567890123456789012345678901234567890123x\"",
        "/agent/agent-provisioning/networks/0/psk",
        "64 hex",
    ),
    (
        "/agent/agent-provisioning/networks/0/priority",
        "1000",
        "/agent/agent-provisioning/networks/0/priority",
        "-999 to 999, found 1000",
    ),
    (
        "/agent/agent-provisioning/networks/0/priority",
        "-1000",
        "/agent/agent-provisioning/networks/0/priority",
        "-999 to 999",
    ),
    (
        "/agent/agent-provisioning/networks/0/priority",
        "1.5",
        "/agent/agent-provisioning/networks/0/priority",
        "integer",
    ),
    (
        "/agent/agent-provisioning/networks/0/priority",
        "1e300",
        "/agent/agent-provisioning/networks/0/priority",
        "integer",
    ),
    (
        "/agent/agent-provisioning/attributes",
        "{\"networks\": [{\"ssid\": \"x\", \"priority\": \"high\"}]}",
        "/agent/agent-provisioning/attributes/networks/0/priority",
        "integer",
    ),
    (
        "/agent/agent-provisioning/attributes",
        "{\"hotspot_password\": \"short\"}",
        "/agent/agent-provisioning/attributes/hotspot_password",
        "8 to 63",
    ),
    (
        "/agent/agent-provisioning/attributes",
        "{\"roaming_mode\": \"yes\"}",
        "/agent/agent-provisioning/attributes/roaming_mode",
        "boolean",
    ),
    // journald sizes and upgrades
    (
        "/agent/agent-syscfg/attributes/logging/system_max_use",
        "\"lots\"",
        "/agent/agent-syscfg/attributes/logging/system_max_use",
        "not a journald size",
    ),
    (
        "/agent/agent-syscfg/attributes/logging/system_max_use",
        "\"512MB\"",
        "/agent/agent-syscfg/attributes/logging/system_max_use",
        "not a journald size",
    ),
    (
        "/agent/agent-syscfg/attributes/logging/system_max_use",
        "512",
        "/agent/agent-syscfg/attributes/logging/system_max_use",
        "expected a string",
    ),
    (
        "/agent/agent-syscfg/attributes/logging/runtime_max_use",
        "\"-5M\"",
        "/agent/agent-syscfg/attributes/logging/runtime_max_use",
        "not a journald size",
    ),
    (
        "/agent/agent-syscfg/attributes/upgrades/type",
        "\"some\"",
        "/agent/agent-syscfg/attributes/upgrades/type",
        "expected \"all\", \"security\" or \"none\"",
    ),
    // ${environment.X} syntax and env shape
    (
        "/modules/1/env/PATH",
        "\"/opt:${environment.PATH\"",
        "/modules/1/env/PATH",
        "without a closing",
    ),
    (
        "/modules/1/env/PATH",
        "\"${PATH}\"",
        "/modules/1/env/PATH",
        "only ${environment.NAME}",
    ),
    (
        "/modules/1/env/PATH",
        "\"${environment.9X}\"",
        "/modules/1/env/PATH",
        "not a variable name",
    ),
    (
        "/modules/1/env/PATH",
        "42",
        "/modules/1/env/PATH",
        "must be strings",
    ),
    (
        "/modules/1/env",
        "[]",
        "/modules/1/env",
        "must be an object",
    ),
    // maintenance window
    (
        "/agent/svc-server/attributes/maintenance_window",
        "{\"start\": \"25:00\", \"end\": \"03:00\"}",
        "/agent/svc-server/attributes/maintenance_window/start",
        "HH:MM",
    ),
    (
        "/agent/svc-server/attributes/maintenance_window",
        "{\"days\": [\"funday\"], \"start\": \"01:00\", \"end\": \"03:00\"}",
        "/agent/svc-server/attributes/maintenance_window/days/0",
        "not a day of the week",
    ),
    (
        "/agent/svc-server/attributes/maintenance_window",
        "{\"days\": [], \"start\": \"01:00\", \"end\": \"03:00\"}",
        "/agent/svc-server/attributes/maintenance_window/days",
        "never allow",
    ),
    (
        "/agent/svc-server/attributes/maintenance_window",
        "{\"start\": \"01:00\", \"end\": \"01:00\"}",
        "/agent/svc-server/attributes/maintenance_window/end",
        "empty",
    ),
    (
        "/agent/svc-server/attributes/maintenance_window",
        "{\"start\": \"01:00\"}",
        "/agent/svc-server/attributes/maintenance_window/end",
        "required",
    ),
];

#[test]
fn base_config_is_valid_without_warnings() {
    let (cfg, report) = parse_value(&base()).unwrap_or_else(|r| panic!("{r}"));
    assert!(report.warnings.is_empty(), "{report}");
    assert_eq!(cfg.components.len(), 2);
    assert_eq!(cfg.modules.len(), 3);
}

#[test]
fn every_rule_reports_its_path_and_reason() {
    for (at, new, path, msg) in CASES {
        let mut v = base();
        set(&mut v, at, serde_json::from_str(new).unwrap());
        let report = match parse_value(&v) {
            Ok((_, r)) => panic!("case {at} = {new} was accepted: {r}"),
            Err(r) => r,
        };
        assert!(
            report
                .errors
                .iter()
                .any(|e| e.path == *path && e.message.contains(msg)),
            "case {at} = {new}: want {path} ~ {msg:?}, got:\n{report}"
        );
    }
}

#[test]
fn all_problems_are_reported_at_once() {
    let mut v = base();
    set(&mut v, "/modules/0/version", json!("nope"));
    set(&mut v, "/agent/svc-server/release_channel", json!("beta"));
    set(
        &mut v,
        "/agent/agent-provisioning/networks/0/priority",
        json!(5000),
    );
    let r = parse_value(&v).unwrap_err();
    assert_eq!(r.errors.len(), 3, "{r}");
}

#[test]
fn unknown_keys_are_kept_and_warned() {
    let mut v = base();
    set(&mut v, "/future_field", json!({"x": 1}));
    set(&mut v, "/modules/0/checksum", json!("abc"));
    set(
        &mut v,
        "/agent/svc-server/attributes/log_level",
        json!("debug"),
    );
    let (cfg, report) = parse_value(&v).unwrap_or_else(|r| panic!("{r}"));
    let paths: Vec<&str> = report.warnings.iter().map(|w| w.path.as_str()).collect();
    assert!(paths.contains(&"/future_field"), "{paths:?}");
    assert!(paths.contains(&"/modules/0/checksum"));
    assert!(paths.contains(&"/agent/svc-server/attributes/log_level"));
    // Round trip: the kept keys come back out.
    let out = serde_json::to_value(&cfg).unwrap();
    assert_eq!(out["future_field"], json!({"x": 1}));
    assert_eq!(out["modules"][0]["checksum"], json!("abc"));
    assert_eq!(
        out["agent"]["svc-server"]["attributes"]["log_level"],
        json!("debug")
    );
}

#[test]
fn warnings_for_both_pins_and_weak_hotspot_password() {
    let mut v = base();
    set(&mut v, "/agent/svc-server/pin_version", json!("1.2.3"));
    set(
        &mut v,
        "/agent/svc-server/pin_url",
        json!("https://example.com/svc-server"),
    );
    set(
        &mut v,
        "/agent/agent-provisioning/attributes",
        json!({"hotspot_password": "password"}),
    );
    let (cfg, r) = parse_value(&v).unwrap_or_else(|r| panic!("{r}"));
    assert!(
        r.warnings
            .iter()
            .any(|w| w.path == "/agent/svc-server/pin_version"
                && w.message.contains("pin_url is used")),
        "{r}"
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| w.path.ends_with("/hotspot_password")
                && w.message.contains("well-known default")),
        "{r}"
    );
    assert_eq!(
        cfg.agent.server.version.choice(),
        svc::config::model::VersionChoice::Url("https://example.com/svc-server")
    );
}

#[test]
fn partial_config_gets_spec_defaults() {
    let (cfg, _) = parse_str(r#"{"agent": {"svc-server": {"pin_version": "0.52.0"}}}"#).unwrap();
    let a = &cfg.agent;
    assert_eq!(a.agent.version.release_channel, "stable");
    assert_eq!(a.server.version.release_channel, "stable");
    assert_eq!(a.server.version.pin_version, "0.52.0");
    assert!(!a.server.disable_subsystem && !a.server.attributes.fast_start);
    assert!(!a.provisioning.disable_subsystem && a.provisioning.networks.is_empty());
    assert!(!a.syscfg.disable_subsystem && !a.syscfg.attributes.logging.disable);
    let (empty, _) = parse_str("{}").unwrap();
    assert!(empty.components.is_empty() && empty.modules.is_empty());
}

#[test]
fn network_defaults_and_hex_psk() {
    let (cfg, _) = parse_str(&format!(
        r#"{{"agent": {{"agent-provisioning": {{"networks": [{{"ssid": "open-cafe"}}, {{"ssid": "hex", "psk": "{}"}}]}}}}}}"#,
        "ab".repeat(32)
    ))
    .unwrap();
    let n = &cfg.agent.provisioning.networks;
    assert_eq!(
        (n[0].net_type.as_str(), n[0].priority, n[0].psk.is_none()),
        ("wifi", 0, true)
    );
    assert_eq!(n[1].psk.as_deref().map(str::len), Some(64));
}

#[test]
fn malformed_json_and_hostile_input_are_errors_not_crashes() {
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let deep_obj = "{\"a\":".repeat(10_000) + "1" + &"}".repeat(10_000);
    let huge_string = format!(
        "{{\"components\": [{{\"name\": \"{}\"}}]}}",
        "x".repeat(5_000_000)
    );
    let inputs = [
        "",
        "{",
        "nul",
        "[1,2",
        "{\"a\":}",
        "\u{feff}{}",
        "{} {}",
        "123",
        "\"str\"",
        "null",
        &deep,
        &deep_obj,
        &huge_string,
        r#"{"agent": {"agent-provisioning": {"networks": [{"ssid": "x", "priority": 1e400}]}}}"#,
        r#"{"agent": {"agent-provisioning": {"networks": [{"ssid": "x", "priority": 18446744073709551616}]}}}"#,
    ];
    for input in inputs {
        let r = parse_str(input)
            .err()
            .unwrap_or_else(|| panic!("{:.40} accepted", input));
        assert!(!r.errors.is_empty());
    }
    let r = parse_str(&deep).unwrap_err();
    assert!(r.errors[0].message.contains("recursion limit"), "{r}");
    assert_eq!(r.errors[0].path, "");
}

// ---- the JSON Schema agrees with the validator ----------------------------------------

fn schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/machine-config.schema.json"
    ))
    .unwrap();
    jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
}

#[test]
fn schema_accepts_every_example() {
    let s = schema();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert!(parse_value(&v).is_ok(), "validator rejects {}", p.display());
        let errs: Vec<String> = s.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errs.is_empty(), "schema rejects {}: {errs:?}", p.display());
        n += 1;
    }
    assert!(n >= 4, "only {n} examples found");
    assert!(s.is_valid(&base()));
}

/// Rules a JSON Schema can express without cross-field knowledge.
const SCHEMA_SKIPS: &[&str] = &[
    "no module declares",
    "not a component of this config",
    "cannot depend on itself",
    "dependency cycle",
    "duplicate",
    "declared twice",
    "without a closing",
    "only ${environment",
    "not a variable name",
    "found 34",
    "empty",
];

#[test]
fn schema_rejects_what_the_validator_rejects() {
    let s = schema();
    let mut checked = 0;
    for (at, new, _, msg) in CASES {
        if SCHEMA_SKIPS.iter().any(|k| msg.contains(k)) {
            continue;
        }
        let mut v = base();
        set(&mut v, at, serde_json::from_str(new).unwrap());
        assert!(!s.is_valid(&v), "schema accepts case {at} = {new} ({msg})");
        checked += 1;
    }
    assert!(checked > 40, "only {checked} cases compared");
}

#[test]
fn deep_nesting_inside_attributes_is_an_error_at_its_component() {
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let text = format!(
        r#"{{"modules": [{{"type": "local", "name": "m", "module_id": "a:b", "executable_path": "/x"}}],
            "components": [{{"name": "c", "model": "a:b:c", "type": "t", "namespace": "rdk", "attributes": {{"x": {deep}}}}}]}}"#
    );
    let r = parse_str(&text).unwrap_err();
    assert_eq!(r.errors[0].path, "/components/0", "{r}");
    assert!(r.errors[0].message.contains("recursion limit"), "{r}");
}

#[test]
fn null_means_not_set_and_duplicate_root_keys_warn() {
    let (cfg, r) = parse_str(r#"{"agent": {"svc-server": {"pin_url": null, "attributes": {"maintenance_window": null}}}, "agent": {}}"#)
        .unwrap_or_else(|r| panic!("{r}"));
    assert_eq!(cfg.agent.server.version.pin_url, "");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.path == "/agent" && w.message.contains("more than once")),
        "{r}"
    );
    // The model serializes to a config that validates again (what the fuzzer checks too).
    let (full, _) = parse_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/full-agent.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let again = parse_str(&serde_json::to_string(&full).unwrap()).unwrap().0;
    assert_eq!(again, full);
}

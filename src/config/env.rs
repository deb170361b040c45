//! The module environment (spec §2.3): `SVC_HOME`, `SVC_MODULE_ROOT`, `SVC_MODULE_DATA`,
//! `SVC_MODULE_ID`, plus the module's `env` with `${environment.X}` read from svc-server's
//! own environment. An unset variable is an error that names it, never an empty string.
use super::model::{Module, ModuleType};
use super::version::Selector;
use semver::Version;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvError {
    /// `${` without a closing `}` or with something other than `environment.NAME` inside.
    Malformed { value: String, reason: String },
    /// `${environment.NAME}` where NAME is not set for svc-server.
    Unset {
        module: String,
        key: String,
        var: String,
    },
    /// `$HOME` is needed for the default `SVC_HOME` but is not set.
    NoHome,
}

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvError::Malformed { value, reason } => {
                write!(f, "malformed variable reference in {value:?}: {reason}")
            }
            EnvError::Unset { module, key, var } => write!(
                f,
                "module {module:?}: env {key} uses ${{environment.{var}}}, but {var} is not set in svc-server's environment"
            ),
            EnvError::NoHome => f.write_str("HOME is not set, so the default SVC_HOME ($HOME/.svc) is unknown; set SVC_HOME"),
        }
    }
}

impl std::error::Error for EnvError {}

/// One piece of an env value template.
#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Var(&'a str),
}

fn is_var_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

fn pieces(value: &str) -> Result<Vec<Piece<'_>>, EnvError> {
    let malformed = |reason: &str| EnvError::Malformed {
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            out.push(Piece::Text(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| malformed("\"${\" without a closing \"}\""))?;
        let inner = &after[..end];
        let name = inner
            .strip_prefix("environment.")
            .ok_or_else(|| malformed("only ${environment.NAME} is supported"))?;
        if !is_var_name(name) {
            return Err(malformed(&format!(
                "{name:?} is not a variable name (letters, digits and '_', not starting with a digit)"
            )));
        }
        out.push(Piece::Var(name));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// Checks the `${environment.X}` syntax of a value without expanding it.
pub(crate) fn check_template(value: &str) -> Result<(), EnvError> {
    pieces(value).map(|_| ())
}

/// Expands `${environment.X}` references with `lookup`.
pub(crate) fn expand(
    value: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, (EnvError, Option<String>)> {
    let mut out = String::new();
    for p in pieces(value).map_err(|e| (e, None))? {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Var(v) => match lookup(v) {
                Some(val) => out.push_str(&val),
                None => return Err((EnvError::NoHome, Some(v.to_string()))),
            },
        }
    }
    Ok(out)
}

/// Where svc-server keeps its state and which machine it is.
#[derive(Clone)]
pub struct HostEnv<'a> {
    /// svc-server's own environment, for `${environment.X}` and `HOME`/`SVC_HOME`.
    pub lookup: &'a dyn Fn(&str) -> Option<String>,
    pub machine_id: String,
}

impl HostEnv<'_> {
    /// `SVC_HOME`: from svc-server's environment, else `$HOME/.svc`.
    pub(crate) fn svc_home(&self) -> Result<PathBuf, EnvError> {
        if let Some(h) = (self.lookup)("SVC_HOME").filter(|h| !h.is_empty()) {
            return Ok(PathBuf::from(h));
        }
        let home = (self.lookup)("HOME")
            .filter(|h| !h.is_empty())
            .ok_or(EnvError::NoHome)?;
        Ok(Path::new(&home).join(".svc"))
    }
}

/// The install folder of a registry module version: `$SVC_HOME/packages/<name>/<version>`.
pub(crate) fn registry_module_root(svc_home: &Path, module_name: &str, version: &str) -> PathBuf {
    svc_home.join("packages").join(module_name).join(version)
}

/// A machine id names a folder under `module-data/`: the characters of an identifier, and
/// not `.` or `..` (an id like `../../etc` would put module data anywhere).
pub(crate) fn check_machine_id(id: &str) -> Result<(), BadMachineId> {
    if crate::config::validate::is_ident(id) {
        Ok(())
    } else {
        Err(BadMachineId(id.to_string()))
    }
}

/// A machine id `check_machine_id` refuses (the id as given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadMachineId(pub String);

impl std::fmt::Display for BadMachineId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "machine id {:?} may hold only letters, digits, '.', '_' and '-', and not be . or .. (it names a folder)",
            self.0
        )
    }
}

impl std::error::Error for BadMachineId {}

/// `$SVC_HOME/module-data/<machine-id>/<module-name>/`.
pub(crate) fn module_data_dir(svc_home: &Path, machine_id: &str, module_name: &str) -> PathBuf {
    svc_home
        .join("module-data")
        .join(machine_id)
        .join(module_name)
}

/// Whether `key` is one of the spec's variables that svc-server sets itself (§2.3), so
/// that a module's `env` cannot change it: `SVC_HOME`, `SVC_MODULE_DATA` (which must stay
/// under `SVC_HOME`), `SVC_MODULE_ID`, and a registry module's `SVC_MODULE_ROOT` (its
/// install folder). A local module sets its own `SVC_MODULE_ROOT` (spec §2.3).
pub(crate) fn is_host_var(key: &str, module_type: Option<ModuleType>) -> bool {
    match key {
        "SVC_HOME" | "SVC_MODULE_DATA" | "SVC_MODULE_ID" => true,
        "SVC_MODULE_ROOT" => module_type != Some(ModuleType::Local),
        _ => false,
    }
}

/// The version whose folder is a registry module's `SVC_MODULE_ROOT`: the deployed one
/// when known; else the one an exact `X.Y.Z` selector names; else none (a range or
/// `latest` names no single version until svc-server has picked one from the registry).
pub(crate) fn module_root_version(module: &Module, deployed: Option<&Version>) -> Option<Version> {
    if module.module_type != ModuleType::Registry {
        return None;
    }
    match (deployed, &module.version) {
        (Some(v), _) => Some(v.clone()),
        (None, Some(Selector::Exact(v))) => Some(v.clone()),
        _ => None,
    }
}

/// The variables svc-server adds for `module`, sorted by name. `deployed` is the deployed
/// version of a registry module; `SVC_MODULE_ROOT` names the folder of
/// [`module_root_version`], and is left out when that is none. The module's `env` cannot
/// change the variables of [`is_host_var`].
pub fn module_env(
    module: &Module,
    host: &HostEnv<'_>,
    deployed: Option<&Version>,
) -> Result<Vec<(String, String)>, EnvError> {
    let home = host.svc_home()?;
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    vars.insert("SVC_HOME".into(), home.display().to_string());
    vars.insert(
        "SVC_MODULE_DATA".into(),
        format!(
            "{}/",
            module_data_dir(&home, &host.machine_id, &module.name).display()
        ),
    );
    vars.insert("SVC_MODULE_ID".into(), module.module_id.clone());
    // A local module's root is set by hand in its env (spec §2.3), if it needs one.
    if let Some(version) = module_root_version(module, deployed) {
        vars.insert(
            "SVC_MODULE_ROOT".into(),
            registry_module_root(&home, &module.name, &version.to_string())
                .display()
                .to_string(),
        );
    }
    for (key, template) in &module.env {
        if is_host_var(key, Some(module.module_type)) {
            continue;
        }
        let value = expand(template, host.lookup).map_err(|(e, var)| match var {
            Some(var) => EnvError::Unset {
                module: module.name.clone(),
                key: key.clone(),
                var,
            },
            None => e,
        })?;
        vars.insert(key.clone(), value);
    }
    Ok(vars.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::Module;
    use serde_json::Map;

    fn module(env: &[(&str, &str)]) -> Module {
        Module {
            module_type: ModuleType::Registry,
            name: "acme_sensors".into(),
            module_id: "acme:sensors".into(),
            version: Some("1.2.3".parse().unwrap()),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            executable_path: None,
            extra: Map::new(),
        }
    }

    fn lookup(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/robot".into()),
            "PATH" => Some("/usr/bin:/bin".into()),
            _ => None,
        }
    }

    #[test]
    fn spec_variables_and_path_prefix() {
        let host = HostEnv {
            lookup: &lookup,
            machine_id: "m-42".into(),
        };
        let env = module_env(
            &module(&[("PATH", "/opt/tools/bin:${environment.PATH}")]),
            &host,
            None,
        )
        .unwrap();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("SVC_HOME"), Some("/home/robot/.svc"));
        assert_eq!(
            get("SVC_MODULE_DATA"),
            Some("/home/robot/.svc/module-data/m-42/acme_sensors/")
        );
        assert_eq!(get("SVC_MODULE_ID"), Some("acme:sensors"));
        assert_eq!(
            get("SVC_MODULE_ROOT"),
            Some("/home/robot/.svc/packages/acme_sensors/1.2.3")
        );
        assert_eq!(get("PATH"), Some("/opt/tools/bin:/usr/bin:/bin"));
        let keys: Vec<_> = env.iter().map(|(k, _)| k.clone()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn host_variables_cannot_be_overridden_and_root_needs_a_version() {
        let host = HostEnv {
            lookup: &lookup,
            machine_id: "m".into(),
        };
        let mut m = module(&[
            ("SVC_HOME", "/elsewhere"),
            ("SVC_MODULE_DATA", "/tmp"),
            ("SVC_MODULE_ROOT", "/x"),
        ]);
        m.version = Some("1.2.*".parse().unwrap());
        let env = module_env(&m, &host, None).unwrap();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("SVC_HOME"), Some("/home/robot/.svc"));
        assert_eq!(
            get("SVC_MODULE_DATA"),
            Some("/home/robot/.svc/module-data/m/acme_sensors/")
        );
        assert_eq!(get("SVC_MODULE_ROOT"), None, "a range names no folder");
        let v = Version::new(1, 2, 7);
        let env = module_env(&m, &host, Some(&v)).unwrap();
        assert!(env.contains(&(
            "SVC_MODULE_ROOT".into(),
            "/home/robot/.svc/packages/acme_sensors/1.2.7".into()
        )));
        // A local module sets its own root.
        m.module_type = ModuleType::Local;
        let env = module_env(&m, &host, None).unwrap();
        assert!(env.contains(&("SVC_MODULE_ROOT".into(), "/x".into())));
    }

    #[test]
    fn unset_variable_is_named() {
        let host = HostEnv {
            lookup: &lookup,
            machine_id: "m".into(),
        };
        let err =
            module_env(&module(&[("X", "a${environment.NOPE_VAR}b")]), &host, None).unwrap_err();
        assert!(err.to_string().contains("NOPE_VAR is not set"), "{err}");
    }

    #[test]
    fn template_syntax() {
        for ok in [
            "plain",
            "${environment.A}",
            "x:${environment.PATH}:y${environment._B1}",
            "$HOME",
            "cost $5",
        ] {
            assert!(check_template(ok).is_ok(), "{ok}");
        }
        for bad in [
            "${environment.A",
            "${HOME}",
            "${environment.}",
            "${environment.1A}",
            "${environment.A-B}",
        ] {
            assert!(check_template(bad).is_err(), "{bad}");
        }
    }
}

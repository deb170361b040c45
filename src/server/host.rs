//! The module host: one supervised process per module of the config, started in dependency
//! order with the spec's environment, changed only where a new config differs, moved
//! between registry versions by their update type, and stopped cleanly.
use super::gate::Gate;
use super::plan;
use super::registry::{self, Installed, Registry, RegistryError};
use crate::config::env::{module_env, HostEnv};
use crate::config::model::{MachineConfig, Module, ModuleType};
use crate::config::version::Selector;
use crate::supervisor::{ChildSpec, ChildState, Env, Policy, Supervisor};
use semver::Version;
use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LOG: &str = "svc-server";

/// Variables svc-server sets itself; never inherited from its own environment.
const OWN_VARS: [&str; 5] = [
    "SVC_MODULE_ROOT",
    "SVC_MODULE_DATA",
    "SVC_MODULE_ID",
    "SVC_MODULE_CONFIG",
    "SVC_MODULE_VERSION",
];

/// How the host runs.
pub(crate) struct HostSettings {
    pub svc_home: PathBuf,
    pub machine_id: String,
    pub registry: Option<Registry>,
    pub policy: Policy,
    /// Between SIGTERM and SIGKILL when a module stops.
    pub stop_timeout: Duration,
    /// svc-server's own environment: the base of every module's, and `${environment.X}`.
    pub base_env: Vec<(String, String)>,
    /// Set when svc-server is asked to stop: registry work in progress is abandoned.
    pub stop: Arc<AtomicBool>,
}

/// Why a module is not running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// Its environment cannot be built (an unset `${environment.X}`): fixed by a new config.
    Env(String),
    /// No installable version (registry unreachable, nothing matches, bad package).
    Registry(String),
    /// A local module's program is missing.
    Program(String),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Env(e) | Problem::Registry(e) | Problem::Program(e) => f.write_str(e),
        }
    }
}

struct ModuleSlot {
    /// The entry this slot runs (differs from the config's while a change failed).
    module: Module,
    /// The deployed registry version.
    version: Option<Version>,
    sup: Option<Supervisor>,
    problem: Option<Problem>,
}

/// A module ready to start.
struct Launch {
    spec: ChildSpec,
    version: Option<Version>,
    data_dir: PathBuf,
    config_path: PathBuf,
    config_json: Vec<u8>,
}

pub(crate) struct ModuleHost {
    s: HostSettings,
    config: Option<MachineConfig>,
    slots: BTreeMap<String, ModuleSlot>,
    order: Vec<String>,
    gate: Gate,
}

/// svc-server's record of the deployed registry versions.
fn record_path(svc_home: &Path) -> PathBuf {
    svc_home.join("state").join("deployed.json")
}

/// The version of `module` that svc-server under `svc_home` last deployed, from its record;
/// `module-env` names the same `SVC_MODULE_ROOT` with it as svc-server does.
pub(crate) fn deployed_version(svc_home: &Path, module: &Module) -> Option<Version> {
    let bytes = std::fs::read(record_path(svc_home)).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let entry = v.get("modules")?.get(&module.name)?;
    if entry.get("module_id")?.as_str()? != module.module_id {
        return None;
    }
    Version::parse(entry.get("version")?.as_str()?).ok()
}

fn get<'a>(vars: &'a [(String, String)], key: &str) -> Option<&'a str> {
    vars.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

impl ModuleHost {
    pub(crate) fn new(s: HostSettings) -> ModuleHost {
        let gate = Gate::new(&s.svc_home);
        ModuleHost {
            s,
            config: None,
            slots: BTreeMap::new(),
            order: Vec::new(),
            gate,
        }
    }

    fn state_dir(&self) -> PathBuf {
        self.s.svc_home.join("state")
    }

    fn record_path(&self) -> PathBuf {
        record_path(&self.s.svc_home)
    }

    /// The deployed versions from the record (what ran before a restart of svc-server).
    fn recorded_version(&self, module: &Module) -> Option<Version> {
        deployed_version(&self.s.svc_home, module)
    }

    fn save_record(&self) {
        let mut modules = serde_json::Map::new();
        for (name, slot) in &self.slots {
            if let Some(v) = &slot.version {
                modules.insert(
                    name.clone(),
                    serde_json::json!({"module_id": slot.module.module_id, "version": v.to_string()}),
                );
            }
        }
        let text = serde_json::to_vec_pretty(&serde_json::json!({ "modules": modules }))
            .unwrap_or_default();
        let path = self.record_path();
        if std::fs::read(&path).ok().as_deref() == Some(&text[..]) {
            return; // written only on change: no periodic SD-card writes
        }
        if let Err(e) = crate::fsutil::atomic_write(&path, &text, 0o644) {
            crate::warn!(LOG, "cannot write {}: {e}", path.display());
        }
    }

    /// The registry version to run: the selector's pick from the registry, installed; when
    /// the registry cannot help, an installed version the selector admits.
    /// Runs slow registry work (index read, download, unpack) on a helper thread while the
    /// modules stay supervised (crashes restarted); `None` when svc-server is asked to stop
    /// meanwhile (the helper is abandoned; its temp files are cleaned by the next install).
    fn off_thread<T: Send + 'static>(
        &mut self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = crate::sys::thread("registry").spawn(move || {
            let _ = tx.send(f());
        });
        if let Err(e) = spawned {
            crate::error!(LOG, "cannot start a registry thread: {e}");
            return None;
        }
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(v) => return Some(v),
                Err(RecvTimeoutError::Disconnected) => return None,
                Err(RecvTimeoutError::Timeout) => {
                    self.tick(Instant::now());
                    if self.s.stop.load(Ordering::Relaxed) {
                        return None;
                    }
                }
            }
        }
    }

    fn fetch_available(&mut self, module_id: &str) -> Result<registry::Available, RegistryError> {
        let Some(reg) = self.s.registry.clone() else {
            return Err(RegistryError::NotConfigured);
        };
        let id = module_id.to_string();
        self.off_thread(move || reg.available(&id))
            .unwrap_or(Err(RegistryError::Interrupted))
    }

    fn install(
        &mut self,
        name: &str,
        version: &Version,
        artifact: &registry::ModuleArtifact,
    ) -> Result<Installed, RegistryError> {
        let (home, name, version, artifact) = (
            self.s.svc_home.clone(),
            name.to_string(),
            version.clone(),
            artifact.clone(),
        );
        self.off_thread(move || registry::install(&home, &name, &version, &artifact))
            .unwrap_or(Err(RegistryError::Interrupted))
    }

    fn choose_version(
        &mut self,
        module: &Module,
        current: Option<&Version>,
    ) -> Result<Installed, Problem> {
        let home = &self.s.svc_home.clone();
        let name = &module.name;
        let Some(sel) = module.version.as_ref() else {
            return Err(Problem::Registry(format!(
                "registry module {name:?} has no version"
            )));
        };
        let fallback = |why: RegistryError| -> Result<Installed, Problem> {
            let have = registry::installed_versions(home, name);
            match offline_choice(sel, current, &have)
                .and_then(|v| registry::installed(home, name, &v))
            {
                Some(i) => {
                    crate::warn!(
                        LOG,
                        "module {name}: {why}; running installed version {}",
                        i.version
                    );
                    Ok(i)
                }
                None => Err(Problem::Registry(format!(
                    "module {name}: {why}, and no installed version matches {sel}"
                ))),
            }
        };
        let avail = match self.fetch_available(&module.module_id) {
            Ok(a) => a,
            Err(e) => return fallback(e),
        };
        let target = match online_choice(sel, current, &avail.list()) {
            Some(v) => v,
            None => {
                let list: Vec<String> = avail.list().iter().map(|v| v.to_string()).collect();
                return Err(Problem::Registry(format!(
                        "module {name}: no version in the registry matches {sel} (available for {}: {})",
                        registry::platform(),
                        if list.is_empty() { "none".to_string() } else { list.join(", ") }
                    )));
            }
        };
        if let Some(i) = registry::installed(home, name, &target) {
            return Ok(i);
        }
        let Some(artifact) = avail.artifact(&target) else {
            return fallback(RegistryError::BadIndex(format!(
                "{target} is not offered for {}",
                registry::platform()
            )));
        };
        crate::info!(
            LOG,
            "module {name}: installing {target} from {}",
            artifact.url
        );
        match self.install(name, &target, artifact) {
            Ok(i) => {
                crate::info!(
                    LOG,
                    "module {name}: {target} installed in {}",
                    i.root.display()
                );
                Ok(i)
            }
            Err(e) => match current.and_then(|c| registry::installed(home, name, c)) {
                Some(i) if sel.admits(&i.version) => {
                    crate::error!(
                        LOG,
                        "module {name}: installing {target} failed: {e}; staying on {}",
                        i.version
                    );
                    Ok(i)
                }
                _ => Err(Problem::Registry(format!(
                    "module {name}: installing {target} failed: {e}"
                ))),
            },
        }
    }

    /// Everything a start of `module` needs; nothing is started or stopped here.
    fn prepare(
        &mut self,
        cfg: &MachineConfig,
        module: &Module,
        current: Option<&Version>,
    ) -> Result<Launch, Problem> {
        let (program, root, version) = match module.module_type {
            ModuleType::Registry => {
                let i = self.choose_version(module, current)?;
                (i.program, Some(i.root), Some(i.version))
            }
            ModuleType::Local => {
                let exe = PathBuf::from(module.executable_path.clone().unwrap_or_default());
                if !exe.is_file() {
                    return Err(Problem::Program(format!(
                        "module {}: executable_path {} does not exist",
                        module.name,
                        exe.display()
                    )));
                }
                (exe, None, None)
            }
        };
        let base = &self.s.base_env;
        let lookup = |k: &str| get(base, k).map(str::to_string);
        let host = HostEnv {
            lookup: &lookup,
            machine_id: self.s.machine_id.clone(),
        };
        let vars =
            module_env(module, &host, version.as_ref()).map_err(|e| Problem::Env(e.to_string()))?;
        // The working directory is SVC_MODULE_ROOT: the version folder of a registry module;
        // for a local module its own SVC_MODULE_ROOT if set, else its program's folder.
        let cwd = match root {
            Some(r) => r,
            None => match get(&vars, "SVC_MODULE_ROOT") {
                Some(r) => PathBuf::from(r),
                None => program
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| PathBuf::from("/")),
            },
        };
        let data_dir = PathBuf::from(get(&vars, "SVC_MODULE_DATA").unwrap_or_default());
        let config_path = self
            .state_dir()
            .join("modules")
            .join(format!("{}.json", module.name));
        let components: Vec<&crate::config::model::Component> = plan::components_of(cfg, module);
        let config_json = serde_json::to_vec_pretty(&serde_json::json!({
            "name": module.name,
            "module_id": module.module_id,
            "version": version.as_ref().map(|v| v.to_string()),
            "components": components,
        }))
        .unwrap_or_default();
        let mut env: Vec<(String, String)> = base
            .iter()
            .filter(|(k, _)| !OWN_VARS.contains(&k.as_str()) && get(&vars, k).is_none())
            .cloned()
            .collect();
        env.extend(vars);
        env.push((
            "SVC_MODULE_CONFIG".into(),
            config_path.display().to_string(),
        ));
        Ok(Launch {
            spec: ChildSpec {
                name: module.name.clone(),
                program,
                args: Vec::new(),
                cwd,
                env: Env::Exactly(env),
            },
            version,
            data_dir,
            config_path,
            config_json,
        })
    }

    /// Starts a prepared module: its data folder (0700, kept across versions), its
    /// components file, then the process.
    fn start(&self, l: Launch) -> Result<Supervisor, Problem> {
        let fail = |what: &str, p: &Path, e: std::io::Error| {
            Problem::Program(format!("{} {what} {}: {e}", l.spec.name, p.display()))
        };
        std::fs::create_dir_all(&l.data_dir).map_err(|e| fail("cannot create", &l.data_dir, e))?;
        std::fs::set_permissions(&l.data_dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| fail("cannot set the mode of", &l.data_dir, e))?;
        crate::fsutil::atomic_write(&l.config_path, &l.config_json, 0o600)
            .map_err(|e| fail("cannot write", &l.config_path, e))?;
        crate::info!(
            LOG,
            "starting module {}{} in {}",
            l.spec.name,
            l.version
                .as_ref()
                .map(|v| format!(" {v}"))
                .unwrap_or_default(),
            l.spec.cwd.display()
        );
        let mut sup = Supervisor::with_policy(l.spec, self.s.policy);
        let _ = sup.start();
        Ok(sup)
    }

    fn resources(&self, module: &Module) -> String {
        let names: Vec<String> = self
            .config
            .iter()
            .flat_map(|c| plan::components_of(c, module))
            .map(|c| c.name.clone())
            .collect();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    }

    fn stop_slot(&self, slot: &mut ModuleSlot, why: &str) {
        if let Some(mut sup) = slot.sup.take() {
            crate::info!(
                LOG,
                "stopping module {} ({why}); its resources stop: {}",
                slot.module.name,
                self.resources(&slot.module)
            );
            sup.stop(self.s.stop_timeout);
        }
    }

    fn warn_missing_deps(&self, cfg: &MachineConfig, name: &str) {
        let deps = plan::module_deps(cfg);
        for d in deps.get(name).into_iter().flatten() {
            let running = self
                .slots
                .get(d)
                .is_some_and(|s| s.sup.as_ref().is_some_and(|x| x.pid().is_some()));
            if !running {
                let why = self
                    .slots
                    .get(d)
                    .and_then(|s| s.problem.as_ref())
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "not running".into());
                crate::warn!(
                    LOG,
                    "module {name}: components depend on resources of module {d}, which is not running ({why}); starting {name} anyway"
                );
            }
        }
    }

    /// (Re)starts module `name` of `cfg`: prepares the new launch first, so that when it
    /// cannot be prepared a running old process keeps running.
    fn launch(&mut self, cfg: &MachineConfig, name: &str, why: &str) {
        let Some(module) = cfg.module(name) else {
            return;
        };
        let current = match self.slots.get(name) {
            Some(s) if s.module.module_id == module.module_id => s.version.clone(),
            Some(_) => None,
            None => self.recorded_version(module),
        };
        self.warn_missing_deps(cfg, name);
        let prepared = self.prepare(cfg, module, current.as_ref());
        let mut slot = self.slots.remove(name).unwrap_or(ModuleSlot {
            module: module.clone(),
            version: None,
            sup: None,
            problem: None,
        });
        match prepared {
            Ok(l) => {
                self.stop_slot(&mut slot, why);
                slot.module = module.clone();
                slot.version = l.version.clone();
                match self.start(l) {
                    Ok(sup) => {
                        slot.sup = Some(sup);
                        slot.problem = None;
                    }
                    Err(p) => {
                        crate::error!(LOG, "module {name} not started: {p}");
                        slot.problem = Some(p);
                    }
                }
            }
            Err(p) => {
                if slot.sup.is_some() {
                    crate::error!(
                        LOG,
                        "module {name}: the change cannot be applied: {p}; it keeps running as before"
                    );
                } else {
                    crate::error!(LOG, "module {name} not started: {p}");
                    slot.module = module.clone();
                }
                slot.problem = Some(p);
            }
        }
        self.slots.insert(name.to_string(), slot);
    }

    /// Applies a new, valid config: only what differs from the running one.
    pub(crate) fn apply(&mut self, new: MachineConfig) {
        self.gate.enter();
        let d = plan::diff(self.config.as_ref(), &new);
        crate::info!(
            LOG,
            "applying config: {} modules added, {} removed, {} changed, {} with changed components, {} unchanged",
            d.added.len(),
            d.removed.len(),
            d.changed.len(),
            d.components_changed.len(),
            d.unchanged.len()
        );
        for name in self.order.clone().iter().rev() {
            if d.removed.contains(name) {
                if let Some(mut slot) = self.slots.remove(name) {
                    self.stop_slot(&mut slot, "removed from the config");
                }
            }
        }
        let (order, cyclic) = plan::start_order(&new);
        if !cyclic.is_empty() {
            crate::warn!(
                LOG,
                "modules {} depend on each other through their components; they start last, in config order",
                cyclic.join(", ")
            );
        }
        for name in &order {
            if d.added.contains(name) {
                self.launch(&new, name, "added");
            } else if d.changed.contains(name) {
                self.launch(&new, name, "its config entry changed");
            } else if d.components_changed.contains(name) {
                self.launch(&new, name, "its components changed");
            } else if self.slots.get(name).is_some_and(|s| s.sup.is_none()) {
                self.launch(&new, name, "retry");
            }
        }
        self.config = Some(new);
        self.order = order;
        self.save_record();
        self.gate.leave();
    }

    /// Retries modules that are not running (after a SIGHUP with an unchanged config).
    pub(crate) fn retry_failed(&mut self) {
        let Some(cfg) = self.config.clone() else {
            return;
        };
        for name in self.order.clone() {
            let pending = self.slots.get(&name).is_some_and(|s| {
                s.sup.is_none() || cfg.module(&name).is_some_and(|m| *m != s.module)
            });
            if pending {
                self.gate.enter();
                self.launch(&cfg, &name, "retry");
                self.gate.leave();
            }
        }
        self.save_record();
    }

    /// The periodic registry check: each registry module moves to what its selector picks
    /// from the registry (spec §9.1); a failed download or unpack leaves it running as is.
    pub(crate) fn check_updates(&mut self) {
        let Some(cfg) = self.config.clone() else {
            return;
        };
        for name in self.order.clone() {
            let Some(module) = cfg.module(&name) else {
                continue;
            };
            let Some(slot) = self.slots.get(&name) else {
                continue;
            };
            // Not running for a reason a later try may fix, or a change that failed.
            let retry = (slot.sup.is_none() && !matches!(slot.problem, Some(Problem::Env(_))))
                || slot.module != *module;
            if retry {
                self.gate.enter();
                self.launch(&cfg, &name, "retry");
                self.gate.leave();
                continue;
            }
            if module.module_type != ModuleType::Registry {
                continue;
            }
            let (Some(_), Some(sel)) = (&self.s.registry, module.version.as_ref()) else {
                continue;
            };
            let current = slot.version.clone();
            let avail = match self.fetch_available(&module.module_id) {
                Ok(a) => a,
                Err(e) => {
                    crate::warn!(LOG, "module {name}: update check failed: {e}");
                    continue;
                }
            };
            let Some(target) = sel.resolve(current.as_ref(), &avail.list()) else {
                continue;
            };
            if Some(&target) == current.as_ref() {
                continue;
            }
            let from = current
                .as_ref()
                .map(|v| v.to_string())
                .unwrap_or_else(|| "nothing".into());
            self.gate.enter();
            crate::info!(LOG, "module {name}: {sel} moves from {from} to {target}");
            let installed = match avail.artifact(&target) {
                Some(a) => self.install(&name, &target, a),
                None => Err(RegistryError::BadIndex(format!("{target} has no artifact"))),
            };
            match installed {
                Ok(_) => self.launch(&cfg, &name, &format!("upgrade from {from} to {target}")),
                Err(e) => crate::error!(
                    LOG,
                    "module {name}: upgrade to {target} failed: {e}; {from} keeps running"
                ),
            }
            self.gate.leave();
        }
        self.save_record();
        crate::debug!(LOG, "registry check done");
    }

    pub(crate) fn tick(&mut self, now: Instant) {
        for slot in self.slots.values_mut() {
            if let Some(sup) = slot.sup.as_mut() {
                let _ = sup.tick(now);
            }
        }
    }

    /// The next restart after a backoff (an exit itself wakes the loop through SIGCHLD).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.slots
            .values()
            .filter_map(|s| match s.sup.as_ref()?.state() {
                ChildState::Backoff { until } | ChildState::CrashLoop { until } => Some(until),
                _ => None,
            })
            .min()
    }

    /// Stops every module: SIGTERM to all at once (so that the waits overlap), then each
    /// stopped in reverse start order with the bounded wait and SIGKILL of its group.
    pub(crate) fn shutdown(&mut self) {
        let running = self.slots.values().filter(|s| s.sup.is_some()).count();
        crate::info!(LOG, "stopping {running} modules");
        for slot in self.slots.values() {
            if let Some(sup) = slot.sup.as_ref() {
                sup.signal(libc::SIGTERM);
            }
        }
        for name in self.order.clone().iter().rev() {
            if let Some(mut slot) = self.slots.remove(name) {
                self.stop_slot(&mut slot, "svc-server is stopping");
            }
        }
        for (_, mut slot) in std::mem::take(&mut self.slots) {
            self.stop_slot(&mut slot, "svc-server is stopping");
        }
    }
}

/// The version to run with the registry reachable: the newest `available` the selector
/// picks, else the current one while the selector still admits it.
fn online_choice(
    sel: &Selector,
    current: Option<&Version>,
    available: &[Version],
) -> Option<Version> {
    sel.resolve(current, available)
        .or_else(|| current.filter(|c| sel.admits(c)).cloned())
}

/// The version to run with the registry out of reach: the current one if it is installed
/// and admitted, else the newest installed version the selector admits.
fn offline_choice(
    sel: &Selector,
    current: Option<&Version>,
    installed: &[Version],
) -> Option<Version> {
    current
        .filter(|c| sel.admits(c) && installed.contains(c))
        .cloned()
        .or_else(|| installed.iter().rev().find(|v| sel.admits(v)).cloned())
}

#[cfg(test)]
mod choice_tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn sel(s: &str) -> Selector {
        s.parse().unwrap()
    }

    #[test]
    fn online_the_newest_admitted_else_the_current() {
        let avail = [v("1.0.0"), v("1.2.0"), v("2.0.0")];
        assert_eq!(online_choice(&sel("1.*"), None, &avail), Some(v("1.2.0")));
        assert_eq!(
            online_choice(&sel("3.*"), Some(&v("3.1.0")), &avail),
            Some(v("3.1.0"))
        );
        assert_eq!(online_choice(&sel("3.*"), Some(&v("2.0.0")), &avail), None);
    }

    #[test]
    fn offline_keeps_the_current_else_the_newest_installed() {
        let have = [v("1.0.0"), v("1.1.0")];
        assert_eq!(
            offline_choice(&sel("1.*"), Some(&v("1.0.0")), &have),
            Some(v("1.0.0"))
        );
        assert_eq!(
            offline_choice(&sel("1.*"), Some(&v("1.5.0")), &have),
            Some(v("1.1.0"))
        );
        assert_eq!(offline_choice(&sel("2.*"), None, &have), None);
    }
}

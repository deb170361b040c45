//! Pure decisions of the host: which components a module serves, the order modules start
//! in (by the components' `depends_on`), and what a new config changes.
use crate::config::model::{Component, MachineConfig, Module};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The components bound to `module`: those whose model triplet starts with its module_id.
pub(crate) fn components_of<'a>(cfg: &'a MachineConfig, module: &Module) -> Vec<&'a Component> {
    cfg.components
        .iter()
        .filter(|c| c.module_id() == module.module_id)
        .collect()
}

/// For each module, the modules it must start after: the modules of the components its
/// components depend on (a module never waits for itself).
pub(crate) fn module_deps(cfg: &MachineConfig) -> BTreeMap<String, BTreeSet<String>> {
    let by_id: HashMap<&str, &str> = cfg
        .modules
        .iter()
        .map(|m| (m.module_id.as_str(), m.name.as_str()))
        .collect();
    let comp_module: HashMap<&str, &str> = cfg
        .components
        .iter()
        .filter_map(|c| Some((c.name.as_str(), *by_id.get(c.module_id())?)))
        .collect();
    let mut deps: BTreeMap<String, BTreeSet<String>> = cfg
        .modules
        .iter()
        .map(|m| (m.name.clone(), BTreeSet::new()))
        .collect();
    for c in &cfg.components {
        let Some(own) = comp_module.get(c.name.as_str()) else {
            continue;
        };
        for d in &c.depends_on {
            // A dependency served by no module (a built-in part) orders nothing.
            if let Some(dm) = comp_module.get(d.as_str()) {
                if dm != own {
                    if let Some(set) = deps.get_mut(*own) {
                        set.insert(dm.to_string());
                    }
                }
            }
        }
    }
    deps
}

/// Module names in start order: each after the modules it depends on, otherwise in config
/// order. Modules on a dependency cycle between modules (possible even when components
/// have none) come last, in config order, and are named in the second list.
pub(crate) fn start_order(cfg: &MachineConfig) -> (Vec<String>, Vec<String>) {
    let deps = module_deps(cfg);
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut order = Vec::new();
    loop {
        let before = order.len();
        for m in &cfg.modules {
            if done.contains(&m.name) {
                continue;
            }
            let ready = deps
                .get(&m.name)
                .is_none_or(|ds| ds.iter().all(|d| done.contains(d)));
            if ready {
                done.insert(m.name.clone());
                order.push(m.name.clone());
            }
        }
        if order.len() == before {
            break;
        }
    }
    let cyclic: Vec<String> = cfg
        .modules
        .iter()
        .filter(|m| !done.contains(&m.name))
        .map(|m| m.name.clone())
        .collect();
    order.extend(cyclic.iter().cloned());
    (order, cyclic)
}

/// What a new config changes, module by module.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Diff {
    /// Modules gone from the config (to stop).
    pub removed: Vec<String>,
    /// New modules (to install and start).
    pub added: Vec<String>,
    /// Modules whose entry changed (env, version selector, module_id, type, program).
    pub changed: Vec<String>,
    /// Same entry, but the set of components it serves changed (to restart).
    pub components_changed: Vec<String>,
    /// Nothing changed for these: they keep running untouched.
    pub unchanged: Vec<String>,
}

impl Diff {}

pub(crate) fn diff(old: Option<&MachineConfig>, new: &MachineConfig) -> Diff {
    let mut d = Diff::default();
    let empty = MachineConfig::default();
    let old = old.unwrap_or(&empty);
    for m in &old.modules {
        if new.module(&m.name).is_none() {
            d.removed.push(m.name.clone());
        }
    }
    for m in &new.modules {
        match old.module(&m.name) {
            None => d.added.push(m.name.clone()),
            Some(o) if o != m => d.changed.push(m.name.clone()),
            Some(o) => {
                if components_of(old, o) != components_of(new, m) {
                    d.components_changed.push(m.name.clone());
                } else {
                    d.unchanged.push(m.name.clone());
                }
            }
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(json: &str) -> MachineConfig {
        crate::config::parse_str(json).unwrap().0
    }

    fn module(name: &str, id: &str) -> String {
        format!(
            r#"{{"type":"local","name":"{name}","module_id":"{id}","version":"latest","executable_path":"/bin/true"}}"#
        )
    }

    fn comp(name: &str, model: &str, deps: &[&str]) -> String {
        let deps: Vec<String> = deps.iter().map(|d| format!("\"{d}\"")).collect();
        format!(
            r#"{{"name":"{name}","model":"{model}","type":"sensor","namespace":"rdk","attributes":{{}},"depends_on":[{}]}}"#,
            deps.join(",")
        )
    }

    fn machine(mods: &[String], comps: &[String]) -> MachineConfig {
        cfg(&format!(
            r#"{{"modules":[{}],"components":[{}]}}"#,
            mods.join(","),
            comps.join(",")
        ))
    }

    #[test]
    fn dependencies_order_starts() {
        // camera (module b) depends on board (module c): c starts before b.
        let m = machine(
            &[module("a", "x:a"), module("b", "x:b"), module("c", "x:c")],
            &[
                comp("cam", "x:b:cam", &["board"]),
                comp("board", "x:c:board", &[]),
                comp("thing", "x:a:t", &["cam"]),
            ],
        );
        let (order, cyclic) = start_order(&m);
        assert_eq!(order, vec!["c", "b", "a"]);
        assert!(cyclic.is_empty());
    }

    #[test]
    fn module_cycle_is_reported_not_hung() {
        // No component cycle, but the modules depend on each other.
        let m = machine(
            &[module("a", "x:a"), module("b", "x:b"), module("z", "x:z")],
            &[
                comp("a1", "x:a:m", &["b1"]),
                comp("b1", "x:b:m", &[]),
                comp("b2", "x:b:m", &["a2"]),
                comp("a2", "x:a:m", &[]),
            ],
        );
        let (order, cyclic) = start_order(&m);
        assert_eq!(order, vec!["z", "a", "b"]);
        assert_eq!(cyclic, vec!["a", "b"]);
    }

    #[test]
    fn diff_names_each_kind_of_change() {
        let old = machine(
            &[
                module("keep", "x:k"),
                module("gone", "x:g"),
                module("edit", "x:e"),
            ],
            &[comp("c1", "x:k:m", &[])],
        );
        let new = machine(
            &[
                module("keep", "x:k"),
                module("edit", "x:e2"),
                module("new", "x:n"),
            ],
            &[comp("c1", "x:k:m", &[]), comp("c2", "x:k:m", &[])],
        );
        let d = diff(Some(&old), &new);
        assert_eq!(d.removed, vec!["gone"]);
        assert_eq!(d.added, vec!["new"]);
        assert_eq!(d.changed, vec!["edit"]);
        assert_eq!(d.components_changed, vec!["keep"]);
        let same = diff(Some(&new), &new);
        assert!(
            same.removed.is_empty()
                && same.added.is_empty()
                && same.changed.is_empty()
                && same.components_changed.is_empty()
        );
        assert_eq!(diff(Some(&new), &new).unchanged.len(), 3);
    }
}

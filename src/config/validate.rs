//! Parsing and validation of a machine config: every rule of spec §2 and §8, every problem
//! reported at once with its JSON pointer, and the typed model built on the way.
use super::diag::{Ptr, Report};
use super::model::*;
use super::version::Selector;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// Parses and validates a config. `Ok` carries the model and any warnings; `Err` carries
/// every error (and warning) found.
pub fn parse_str(text: &str) -> Result<(MachineConfig, Report), Report> {
    parse_slice(text.as_bytes())
}

/// Like [`parse_str`], from bytes (which must be UTF-8).
///
/// The document is read in two levels to bound memory: the top-level members and each
/// component are first kept as raw JSON text, then one component at a time is parsed,
/// checked and turned into the model, its attributes staying as text.
pub fn parse_slice(bytes: &[u8]) -> Result<(MachineConfig, Report), Report> {
    let mut r = Report::default();
    let members = match serde_json::from_slice::<Members>(bytes) {
        Ok(m) => m,
        Err(_) => {
            // Not an object, or not JSON at all: the tree parse names the problem.
            return Err(match serde_json::from_slice::<Value>(bytes) {
                Ok(other) => {
                    r.error(
                        &Ptr::root(),
                        format!(
                            "the machine config must be an object, found {}",
                            kind(&other)
                        ),
                    );
                    r
                }
                Err(e) => {
                    let (at, message) = syntax_error(bytes, &Ptr::root(), &e);
                    r.error(&at, format!("not valid JSON: {message}"));
                    r
                }
            });
        }
    };
    let cfg = machine(members, &mut r);
    crate::logging::register_secrets(std::mem::take(&mut r.secrets));
    if r.is_valid() {
        Ok((cfg, r))
    } else {
        Err(r)
    }
}

/// Validates an already parsed document.
pub fn parse_value(root: &Value) -> Result<(MachineConfig, Report), Report> {
    parse_str(&root.to_string())
}

/// Where a JSON syntax error lies, as the pointer of the value being read there (under
/// `base`, the pointer of `text` itself), and its message. Depth is bounded by serde_json's
/// recursion limit (128), so deep nesting is an error, never a stack overflow; it and a
/// number out of range (`1e400`) are reported at the value, not at the enclosing section.
fn syntax_error(text: &[u8], base: &Ptr, e: &serde_json::Error) -> (Ptr, String) {
    let at = pointer_at(text, offset_of(text, e.line(), e.column()), base);
    let message = e.to_string();
    // Line and column count from the start of `text`, which is a part of the document
    // unless `base` is the root: there the pointer says where, and they would mislead.
    let message = match message.rsplit_once(" at line ") {
        Some((m, _)) if base != &Ptr::root() => m.to_string(),
        _ => message,
    };
    (at, message)
}

/// The byte offset of serde_json's 1-based line and (byte) column.
fn offset_of(text: &[u8], line: usize, column: usize) -> usize {
    let mut start = 0;
    for _ in 1..line {
        match text[start..].iter().position(|&b| b == b'\n') {
            Some(p) => start += p + 1,
            None => return text.len(),
        }
    }
    (start + column.saturating_sub(1)).min(text.len())
}

/// The pointer (under `base`) of the value that `text[offset]` is part of. `text` is JSON
/// up to `offset` (serde_json read that far), so one pass that tracks the open containers
/// and their current key or index finds it.
fn pointer_at(text: &[u8], offset: usize, base: &Ptr) -> Ptr {
    enum Frame {
        /// An object and the key of the member being read (`None` between members).
        Obj(Option<String>),
        /// An array and the index of the element being read.
        Arr(usize),
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut expect_key = false;
    let end = offset.min(text.len());
    let mut i = 0;
    while i < end {
        match text[i] {
            b'{' => {
                stack.push(Frame::Obj(None));
                expect_key = true;
            }
            b'[' => stack.push(Frame::Arr(0)),
            b'}' | b']' => {
                stack.pop();
                expect_key = false;
            }
            b',' => match stack.last_mut() {
                Some(Frame::Arr(n)) => *n += 1,
                Some(Frame::Obj(k)) => {
                    *k = None;
                    expect_key = true;
                }
                None => {}
            },
            b'"' => {
                let mut j = i + 1;
                while j < end && text[j] != b'"' {
                    j += if text[j] == b'\\' { 2 } else { 1 };
                }
                if expect_key {
                    if let Some(Frame::Obj(k)) = stack.last_mut() {
                        let raw = &text[i..(j + 1).min(text.len())];
                        *k = Some(serde_json::from_slice(raw).unwrap_or_else(|_| {
                            String::from_utf8_lossy(&raw[1..])
                                .trim_end_matches('"')
                                .to_string()
                        }));
                    }
                    expect_key = false;
                }
                i = j;
            }
            _ => {}
        }
        i += 1;
    }
    let mut p = base.clone();
    for f in &stack {
        match f {
            Frame::Obj(Some(k)) => p = p.key(k),
            // Between members: the object itself is the place.
            Frame::Obj(None) => break,
            Frame::Arr(n) => p = p.idx(*n),
        }
    }
    p
}

type Raw<'a> = &'a serde_json::value::RawValue;

/// The members of a JSON object in document order, values unparsed.
struct Members<'a>(Vec<(String, Raw<'a>)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Members<'a>, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Raw<'a>>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// Parses one raw member into a tree, reporting a syntax problem at its path.
fn tree(raw: Raw<'_>, path: &Ptr, r: &mut Report) -> Option<Value> {
    tree_or_report(raw, || path.clone(), r)
}

/// [`tree`], with the path made only for a problem (most members have none).
fn tree_or_report(raw: Raw<'_>, path: impl FnOnce() -> Ptr, r: &mut Report) -> Option<Value> {
    match serde_json::from_str(raw.get()) {
        Ok(v) => Some(v),
        Err(e) => {
            let (at, message) = syntax_error(raw.get().as_bytes(), &path(), &e);
            r.error(&at, format!("not valid JSON: {message}"));
            None
        }
    }
}

/// Whether a raw member is `null` ("not set", as everywhere else).
fn is_null(raw: Raw<'_>) -> bool {
    raw.get().trim() == "null"
}

/// The elements of a raw array member, unparsed; a non-array is reported.
fn raw_array<'a>(raw: Raw<'a>, path: &Ptr, r: &mut Report) -> Vec<Raw<'a>> {
    match serde_json::from_str::<Vec<Raw<'a>>>(raw.get()) {
        Ok(items) => items,
        Err(_) => {
            if let Some(v) = tree(raw, path, r) {
                r.error(path, format!("expected an array, found {}", kind(&v)));
            }
            Vec::new()
        }
    }
}

// ---- small typed accessors -------------------------------------------------------------

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One JSON object being read: knows its path and which keys were consumed.
struct Obj<'a> {
    map: &'a Map<String, Value>,
    path: Ptr,
}

impl<'a> Obj<'a> {
    fn new(v: &'a Value, path: &Ptr, what: &str, r: &mut Report) -> Option<Obj<'a>> {
        match v {
            Value::Object(map) => Some(Obj {
                map,
                path: path.clone(),
            }),
            other => {
                r.error(
                    path,
                    format!("{what} must be an object, found {}", kind(other)),
                );
                None
            }
        }
    }

    fn at(&self, key: &str) -> Ptr {
        self.path.key(key)
    }

    /// A member's value; `null` counts as absent (editors write it for "not set").
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn string(&self, key: &str, required: bool, r: &mut Report) -> Option<String> {
        match self.get(key) {
            None if required => {
                r.error(
                    &self.at(key),
                    "required field is missing (expected a string)",
                );
                None
            }
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                r.error(
                    &self.at(key),
                    format!("expected a string, found {}", kind(other)),
                );
                None
            }
        }
    }

    /// A required string that must not be empty.
    fn name(&self, key: &str, r: &mut Report) -> Option<String> {
        let s = self.string(key, true, r)?;
        if s.trim().is_empty() {
            r.error(&self.at(key), "must not be empty");
            return None;
        }
        Some(s)
    }

    fn boolean(&self, key: &str, r: &mut Report) -> Option<bool> {
        match self.get(key)? {
            Value::Bool(b) => Some(*b),
            other => {
                r.error(
                    &self.at(key),
                    format!("expected a boolean (true or false), found {}", kind(other)),
                );
                None
            }
        }
    }

    /// An integer from 0 to [`MAX_UINT`] (seconds: a bound that JSON Schema and every
    /// JSON reader compare exactly, unlike u64's maximum, which is no f64).
    fn uint(&self, key: &str, r: &mut Report) -> Option<u64> {
        let v = self.get(key)?;
        match integer(v).and_then(|n| u64::try_from(n).ok()) {
            Some(n) if n <= MAX_UINT => Some(n),
            _ => {
                r.error(
                    &self.at(key),
                    format!(
                        "expected an integer from 0 to {MAX_UINT}, found {}",
                        describe(v)
                    ),
                );
                None
            }
        }
    }

    fn object(&self, key: &str, r: &mut Report) -> Option<Obj<'a>> {
        let v = self.get(key)?;
        Obj::new(v, &self.at(key), key, r)
    }

    fn array(&self, key: &str, r: &mut Report) -> Option<&'a Vec<Value>> {
        match self.get(key)? {
            Value::Array(a) => Some(a),
            other => {
                r.error(
                    &self.at(key),
                    format!("expected an array, found {}", kind(other)),
                );
                None
            }
        }
    }

    /// Keys not in `known`: kept (returned) and reported as warnings, at most
    /// [`MAX_UNKNOWN_REPORTED`] of them.
    fn extra(&self, known: &[&str], r: &mut Report) -> Map<String, Value> {
        let mut extra = Map::new();
        let mut unknown = UnknownKeys::default();
        for (k, v) in self.map {
            if !known.contains(&k.as_str()) {
                unknown.report(|| self.at(k), k, r);
                extra.insert(k.clone(), v.clone());
            }
        }
        unknown.finish(&self.path, r);
        extra
    }
}

/// Unknown keys reported one by one per object; the rest are counted in one warning. A
/// generator gone wrong can write millions of them, and each warning is a log line.
const MAX_UNKNOWN_REPORTED: usize = 100;

/// The unknown keys of one object, reported up to [`MAX_UNKNOWN_REPORTED`].
#[derive(Default)]
struct UnknownKeys {
    seen: usize,
}

impl UnknownKeys {
    /// `at` is called only for a key that is listed: a pointer is an allocation, and an
    /// object may hold millions of unknown keys.
    fn report(&mut self, at: impl FnOnce() -> Ptr, key: &str, r: &mut Report) {
        self.seen += 1;
        if self.seen <= MAX_UNKNOWN_REPORTED {
            r.warn(
                &at(),
                format!("unknown key {key:?} (kept, but not used by svc-agent)"),
            );
        }
    }

    fn finish(self, object: &Ptr, r: &mut Report) {
        if self.seen > MAX_UNKNOWN_REPORTED {
            r.warn(
                object,
                format!(
                    "{} more unknown keys here (kept, but not used by svc-agent; only the first {MAX_UNKNOWN_REPORTED} are listed)",
                    self.seen - MAX_UNKNOWN_REPORTED
                ),
            );
        }
    }
}

/// The largest value of an integer option (seconds): 2^32 - 1, about 136 years.
pub(crate) const MAX_UINT: u64 = u32::MAX as u64;

/// An integer in JSON Schema's sense: a number with no fraction, so `5.0` is 5 and `-0`
/// (which serde_json reads as the float -0.0) is 0.
fn integer(v: &Value) -> Option<i128> {
    if let Some(n) = v.as_i64() {
        return Some(n.into());
    }
    if let Some(n) = v.as_u64() {
        return Some(n.into());
    }
    let f = v.as_f64()?;
    // Beyond 2^63 a float is far outside every range checked here anyway.
    (f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i128)
}

fn describe(v: &Value) -> String {
    match v {
        Value::Number(n) => format!("{n}"),
        other => kind(other).to_string(),
    }
}

// ---- the document ----------------------------------------------------------------------

fn machine(members: Members<'_>, r: &mut Report) -> MachineConfig {
    let root = Ptr::root();
    let mut cfg = MachineConfig::default();
    // The last occurrence of each key is the one used (as serde_json does). Unknown keys
    // are kept in `extra`, whose own insert finds their repeats: one hash per key.
    let mut last_of: HashMap<&str, Raw<'_>> = HashMap::new();
    let mut unknown = UnknownKeys::default();
    for (key, raw) in &members.0 {
        let repeated = if matches!(key.as_str(), "components" | "modules" | "agent") {
            last_of.insert(key, *raw).is_some()
        } else {
            unknown.report(|| root.key(key), key, r);
            match tree_or_report(raw, || root.key(key), r) {
                Some(v) => cfg.extra.insert(key.clone(), v).is_some(),
                None => false,
            }
        };
        if repeated {
            r.warn(
                &root.key(key),
                format!("key {key:?} appears more than once; the last one is used"),
            );
        }
    }
    unknown.finish(&root, r);
    // `null` means "not set" for a section as for any other member.
    let last = |name: &str| last_of.get(name).copied().filter(|raw| !is_null(raw));
    let mut modules = Vec::new();
    let mut module_refs = Vec::new();
    let mut module_ids = HashSet::new();
    if let Some(raw) = last("modules") {
        let base = root.key("modules");
        for (i, item) in raw_array(raw, &base, r).iter().enumerate() {
            let path = base.idx(i);
            let Some(v) = tree(item, &path, r) else {
                continue;
            };
            if let Some(id) = v.get("module_id").and_then(Value::as_str) {
                module_ids.insert(id.to_string());
            }
            let (m, refs) = module(&v, i, &path, r);
            if let Some(m) = m {
                modules.push(m);
            }
            module_refs.push(refs);
        }
    }
    check_unique_modules(&module_refs, r);
    let mut components = Vec::new();
    if let Some(raw) = last("components") {
        let base = root.key("components");
        for (i, item) in raw_array(raw, &base, r).into_iter().enumerate() {
            let path = base.idx(i);
            let Some(v) = tree(item, &path, r) else {
                continue;
            };
            if let Some(c) = component(v, i, &path, r) {
                components.push(c);
            }
        }
    }
    // Cross-references use every declared id and name, also of entries with other errors,
    // so that one mistake is reported once rather than again at each reference; and every
    // entry's own references are checked, also when it has other errors.
    check_components(&components, &module_ids, r);
    if let Some(raw) = last("agent") {
        if let Some((v, lists)) = agent_tree(raw, &root.key("agent"), r) {
            if let Some(a) = Obj::new(&v, &root.key("agent"), "agent", r) {
                cfg.agent = agent(&a, lists, r);
            }
        }
    }
    cfg.components = components
        .into_iter()
        .filter_map(|c| match c {
            Entry::Whole(_, c) => Some(c),
            Entry::Part(_) => None,
        })
        .collect();
    cfg.modules = modules;
    cfg
}

/// A component as the cross-checks see it: whole, or, when it has errors, whatever of it
/// is readable (so that its references are checked too). Whole components are not copied.
enum Entry {
    Whole(usize, Component),
    Part(ComponentRefs),
}

struct ComponentRefs {
    index: usize,
    name: Option<String>,
    /// A name that is a string but not a valid one (empty): a `depends_on` naming it is
    /// not reported again.
    bad_name: Option<String>,
    model: Option<String>,
    /// The well-formed entries of `depends_on`...
    depends_on: Vec<String>,
    /// ...and their positions, when some entry was left out (else the same).
    positions: Option<Vec<usize>>,
}

/// The module id part of a three-part model, `<namespace>:<module-name>`.
fn model_module_id(model: &str) -> Option<&str> {
    if model.split(':').count() != 3 {
        return None;
    }
    model.rfind(':').map(|i| &model[..i])
}

impl Entry {
    fn index(&self) -> usize {
        match self {
            Entry::Whole(i, _) => *i,
            Entry::Part(p) => p.index,
        }
    }
    fn name(&self) -> Option<&str> {
        match self {
            Entry::Whole(_, c) => Some(&c.name),
            Entry::Part(p) => p.name.as_deref(),
        }
    }
    fn module_id(&self) -> Option<&str> {
        match self {
            Entry::Whole(_, c) => model_module_id(&c.model),
            Entry::Part(p) => p.model.as_deref().and_then(model_module_id),
        }
    }
    /// (position in the file, name) of each readable `depends_on` entry.
    fn depends_on(&self) -> impl Iterator<Item = (usize, &str)> {
        let (list, positions) = match self {
            Entry::Whole(_, c) => (&c.depends_on, None),
            Entry::Part(p) => (&p.depends_on, p.positions.as_ref()),
        };
        list.iter()
            .enumerate()
            .map(move |(k, d)| (positions.map_or(k, |p| p[k]), d.as_str()))
    }
}

/// What the cross-checks need of a module, also when other fields have errors.
#[derive(Default)]
struct ModuleRefs {
    index: usize,
    name: Option<String>,
    module_id: Option<String>,
}

/// `[A-Za-z0-9._-]+` but not `.` or `..`: namespaces, module names and model names, which
/// also name folders (`SVC_MODULE_DATA`, the registry's `packages/<name>`).
pub(crate) fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn component(mut v: Value, index: usize, path: &Ptr, r: &mut Report) -> Option<Entry> {
    let errors_before = r.errors.len();
    // Attributes are opaque here: keep them as compact text, checked only to be an object.
    let attributes = match v.as_object_mut().and_then(|m| m.shift_remove("attributes")) {
        None | Some(Value::Null) => Some(RawJson::empty_object()),
        Some(a @ Value::Object(_)) => serde_json::value::to_raw_value(&a).ok().map(RawJson),
        Some(other) => {
            r.error(
                &path.key("attributes"),
                format!("attributes must be an object, found {}", kind(&other)),
            );
            None
        }
    };
    let o = Obj::new(&v, path, "a component", r)?;
    let name = o.name("name", r);
    let model = o.name("model", r);
    if let Some(m) = &model {
        let parts: Vec<&str> = m.split(':').collect();
        if parts.len() != 3 || !parts.iter().all(|p| is_ident(p)) {
            r.error(
                &o.at("model"),
                format!("model {m:?} must be a triplet <namespace>:<module-name>:<model-name> (letters, digits, '.', '_', '-')"),
            );
        }
    }
    let api_type = o.name("type", r);
    let namespace = o.name("namespace", r);
    let mut depends_on = Vec::new();
    let mut positions: Option<Vec<usize>> = None;
    if let Some(list) = o.array("depends_on", r) {
        for (i, d) in list.iter().enumerate() {
            match d {
                Value::String(s) if !s.is_empty() => {
                    if let Some(p) = &mut positions {
                        p.push(i);
                    }
                    depends_on.push(s.clone());
                }
                other => {
                    // From the first one left out, positions differ from indexes.
                    positions.get_or_insert_with(|| (0..depends_on.len()).collect());
                    r.error(
                        &o.at("depends_on").idx(i),
                        format!(
                            "expected a component name (non-empty string), found {}",
                            kind(other)
                        ),
                    )
                }
            }
        }
    }
    let extra = o.extra(
        &[
            "name",
            "model",
            "type",
            "namespace",
            "attributes",
            "depends_on",
        ],
        r,
    );
    Some(match (name, model, api_type, namespace, attributes) {
        (Some(name), Some(model), Some(api_type), Some(namespace), Some(attributes))
            if r.errors.len() == errors_before =>
        {
            Entry::Whole(
                index,
                Component {
                    name,
                    model,
                    api_type,
                    namespace,
                    attributes,
                    depends_on,
                    extra,
                },
            )
        }
        (name, model, ..) => Entry::Part(ComponentRefs {
            index,
            bad_name: match name {
                None => o
                    .map
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                Some(_) => None,
            },
            name,
            model,
            depends_on,
            positions,
        }),
    })
}

fn check_components(comps: &[Entry], module_ids: &HashSet<String>, r: &mut Report) {
    let base = Ptr::root().key("components");
    // Each name to the position (in `comps`) of its first component: the one index for
    // duplicates, depends_on targets and the cycle check, all in linear time.
    let mut first: HashMap<&str, usize> = HashMap::with_capacity(comps.len());
    let mut bad_names: HashSet<&str> = HashSet::new();
    for (k, c) in comps.iter().enumerate() {
        if let Entry::Part(ComponentRefs {
            bad_name: Some(n), ..
        }) = c
        {
            bad_names.insert(n);
        }
        let Some(name) = c.name() else { continue };
        match first.entry(name) {
            std::collections::hash_map::Entry::Occupied(e) => r.error(
                &base.idx(c.index()).key("name"),
                format!(
                    "duplicate component name {name:?} (also /components/{})",
                    comps[*e.get()].index()
                ),
            ),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(k);
            }
        }
    }
    // The dependency graph for the cycle check: how many components each waits on, and
    // who waits on each. `listed_by[t] == k + 1` when component k already listed t.
    let mut waiting_on = vec![0usize; comps.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); comps.len()];
    let mut listed_by = vec![0usize; comps.len()];
    for (k, c) in comps.iter().enumerate() {
        // Pointers are made only for a problem: a component may list 100,000s of names.
        let at = || base.idx(c.index());
        if let Some(id) = c.module_id() {
            if !module_ids.contains(id) {
                r.error(
                    &at().key("model"),
                    format!(
                        "no module declares module_id {id:?} (the first two parts of the model must equal a module's module_id)"
                    ),
                );
            }
        }
        for (j, d) in c.depends_on() {
            let p = || at().key("depends_on").idx(j);
            if Some(d) == c.name() {
                r.error(&p(), format!("component {d:?} cannot depend on itself"));
                continue;
            }
            match first.get(d) {
                Some(&t) if listed_by[t] == k + 1 => {
                    r.warn(&p(), format!("{d:?} is listed twice"));
                }
                Some(&t) => {
                    listed_by[t] = k + 1;
                    if t != k {
                        waiting_on[k] += 1;
                        dependents[t].push(k);
                    }
                }
                // A component whose name is itself in error: reported there.
                None if bad_names.contains(d) => {}
                None => r.error(
                    &p(),
                    format!("depends on {d:?}, which is not a component of this config"),
                ),
            }
        }
    }
    check_dependency_cycles(comps, waiting_on, &dependents, r);
}

/// A cycle in `depends_on` can never start; name one component on it.
fn check_dependency_cycles(
    comps: &[Entry],
    mut waiting_on: Vec<usize>,
    dependents: &[Vec<usize>],
    r: &mut Report,
) {
    // Kahn's algorithm: repeatedly take components whose dependencies are all taken;
    // whatever is never taken sits on (or behind) a cycle.
    let mut ready: Vec<usize> = (0..comps.len()).filter(|&k| waiting_on[k] == 0).collect();
    while let Some(k) = ready.pop() {
        for &n in &dependents[k] {
            waiting_on[n] -= 1;
            if waiting_on[n] == 0 {
                ready.push(n);
            }
        }
    }
    if let Some(k) = (0..comps.len()).find(|&k| waiting_on[k] > 0) {
        let c = &comps[k];
        r.error(
            &Ptr::root()
                .key("components")
                .idx(c.index())
                .key("depends_on"),
            format!(
                "dependency cycle through component {:?}",
                c.name().unwrap_or_default()
            ),
        );
    }
}

fn module(v: &Value, index: usize, path: &Ptr, r: &mut Report) -> (Option<Module>, ModuleRefs) {
    let mut refs = ModuleRefs {
        index,
        ..Default::default()
    };
    let Some(o) = Obj::new(v, path, "a module", r) else {
        return (None, refs);
    };
    let module_type = match o.string("type", true, r).as_deref() {
        Some("registry") => Some(ModuleType::Registry),
        Some("local") => Some(ModuleType::Local),
        Some(other) => {
            r.error(
                &o.at("type"),
                format!("module type {other:?} is not allowed: expected \"registry\" or \"local\""),
            );
            None
        }
        None => None,
    };
    let name = o.name("name", r);
    if let Some(n) = &name {
        if !is_ident(n) {
            r.error(
                &o.at("name"),
                format!("module name {n:?} may hold only letters, digits, '.', '_' and '-' (it names a folder)"),
            );
        }
    }
    let module_id = o.name("module_id", r);
    if let Some(id) = &module_id {
        let parts: Vec<&str> = id.split(':').collect();
        if parts.len() != 2 || !parts.iter().all(|p| is_ident(p)) {
            r.error(
                &o.at("module_id"),
                format!("module_id {id:?} must be <namespace or UUID>:<module name>"),
            );
        }
    }
    let version = match o.string("version", module_type == Some(ModuleType::Registry), r) {
        Some(s) => match s.parse::<Selector>() {
            Ok(sel) => Some(sel),
            Err(e) => {
                r.error(&o.at("version"), e.to_string());
                None
            }
        },
        None => None,
    };
    let executable_path = o.string("executable_path", false, r);
    match (module_type, &executable_path) {
        (Some(ModuleType::Local), None) => r.error(
            &o.at("executable_path"),
            "a local module needs executable_path (the absolute path of its program)",
        ),
        (Some(ModuleType::Local), Some(p)) if !p.starts_with('/') => r.error(
            &o.at("executable_path"),
            format!("executable_path {p:?} must be an absolute path"),
        ),
        (Some(ModuleType::Registry), Some(_)) => r.warn(
            &o.at("executable_path"),
            "ignored for a registry module (its entrypoint comes from the registry)",
        ),
        _ => {}
    }
    let env = o
        .object("env", r)
        .map(|e| module_env(&e, module_type, r))
        .unwrap_or_default();
    let extra = o.extra(
        &[
            "type",
            "name",
            "module_id",
            "version",
            "env",
            "executable_path",
        ],
        r,
    );
    refs.name.clone_from(&name);
    refs.module_id.clone_from(&module_id);
    let m = match (module_type, name, module_id, version) {
        (Some(ModuleType::Registry), _, _, None) => None,
        (Some(module_type), Some(name), Some(module_id), version) => Some(Module {
            module_type,
            name,
            module_id,
            version,
            env,
            executable_path,
            extra,
        }),
        _ => None,
    };
    (m, refs)
}

fn module_env(
    o: &Obj<'_>,
    module_type: Option<ModuleType>,
    r: &mut Report,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in o.map {
        let p = o.at(k);
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            r.error(
                &p,
                format!(
                    "environment variable name {k:?} is not valid (empty, or holds '=' or NUL)"
                ),
            );
            continue;
        }
        let Value::String(s) = v else {
            r.error(
                &p,
                format!("environment values must be strings, found {}", kind(v)),
            );
            continue;
        };
        if let Err(e) = super::env::check_template(s) {
            r.error(&p, e.to_string());
            continue;
        }
        if s.contains('\0') {
            r.error(&p, "environment values cannot hold NUL");
            continue;
        }
        if super::env::is_host_var(k, module_type) {
            r.warn(
                &p,
                format!("ignored: svc-server sets {k} itself for every module (spec 2.3)"),
            );
        }
        out.push((k.clone(), s.clone()));
    }
    out
}

fn check_unique_modules(modules: &[ModuleRefs], r: &mut Report) {
    let base = Ptr::root().key("modules");
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut ids: HashMap<&str, usize> = HashMap::new();
    for m in modules {
        if let Some(name) = &m.name {
            if let Some(first) = names.get(name.as_str()) {
                r.error(
                    &base.idx(m.index).key("name"),
                    format!("duplicate module name {name:?} (also /modules/{first})"),
                );
            } else {
                names.insert(name, m.index);
            }
        }
        if let Some(id) = &m.module_id {
            if let Some(first) = ids.get(id.as_str()) {
                r.error(
                    &base.idx(m.index).key("module_id"),
                    format!("module_id {id:?} is declared twice (also /modules/{first})"),
                );
            } else {
                ids.insert(id, m.index);
            }
        }
    }
}

// ---- the agent section -----------------------------------------------------------------

/// The two `networks` lists of `agent-provisioning` (the section's and its attributes'), set
/// aside as raw JSON from the agent's tree: a generator can write hundreds of thousands of
/// networks, and each is then parsed on its own, so memory holds one network's tree at a
/// time rather than the whole list's (450,000 networks took 730 MB as one tree).
#[derive(Default)]
struct NetworkLists<'a> {
    section: Option<Raw<'a>>,
    attributes: Option<Raw<'a>>,
}

/// The agent section as a tree, without its [`NetworkLists`]. Not an object, or not JSON:
/// the whole tree (the caller reports what it is).
fn agent_tree<'a>(raw: Raw<'a>, path: &Ptr, r: &mut Report) -> Option<(Value, NetworkLists<'a>)> {
    let mut lists = NetworkLists::default();
    let Ok(members) = serde_json::from_str::<Members<'a>>(raw.get()) else {
        return tree(raw, path, r).map(|v| (v, lists));
    };
    let mut map = Map::new();
    for (key, raw) in members.0 {
        let at = path.key(&key);
        let value = if key == "agent-provisioning" {
            let NetworkLists {
                section,
                attributes,
            } = &mut lists;
            without_networks(raw, &at, r, section, Some(attributes))?
        } else {
            tree(raw, &at, r)?
        };
        // The last occurrence of a key is the one used, as in serde_json's own tree.
        map.insert(key, value);
    }
    Some((Value::Object(map), lists))
}

/// An object's tree without its `networks` member, whose raw text goes to `networks`; with
/// `nested`, the same for its `attributes` object. A non-object is returned whole.
fn without_networks<'a>(
    raw: Raw<'a>,
    path: &Ptr,
    r: &mut Report,
    networks: &mut Option<Raw<'a>>,
    mut nested: Option<&mut Option<Raw<'a>>>,
) -> Option<Value> {
    let Ok(members) = serde_json::from_str::<Members<'a>>(raw.get()) else {
        return tree(raw, path, r);
    };
    let mut map = Map::new();
    for (key, raw) in members.0 {
        let at = path.key(&key);
        let value = match (key.as_str(), nested.as_deref_mut()) {
            ("networks", _) => {
                *networks = Some(raw);
                continue;
            }
            ("attributes", Some(inner)) => without_networks(raw, &at, r, inner, None)?,
            _ => tree(raw, &at, r)?,
        };
        map.insert(key, value);
    }
    Some(Value::Object(map))
}

fn agent(o: &Obj<'_>, lists: NetworkLists<'_>, r: &mut Report) -> AgentConfig {
    let mut a = AgentConfig::default();
    if let Some(s) = o.object("svc-agent", r) {
        a.agent.version = version_control(&s, &["stable"], r);
        if let Some(h) = s.object("hawkbit", r) {
            a.agent.hawkbit = hawkbit(&h, r);
        }
        if let Some(l) = s.object("logs", r) {
            a.agent.logs = log_settings(&l, r);
        }
        if let Some(u) = s.object("updates", r) {
            a.agent.updates = update_settings(&u, r);
        }
        a.agent.extra = s.extra(
            &[
                "release_channel",
                "pin_version",
                "pin_url",
                "hawkbit",
                "logs",
                "updates",
            ],
            r,
        );
    }
    if let Some(s) = o.object("svc-server", r) {
        a.server = server(&s, r);
    }
    if let Some(s) = o.object("agent-provisioning", r) {
        a.provisioning = provisioning(&s, lists, r);
    }
    if let Some(s) = o.object("agent-syscfg", r) {
        a.syscfg = syscfg(&s, r);
    }
    a.extra = o.extra(
        &[
            "svc-agent",
            "svc-server",
            "agent-provisioning",
            "agent-syscfg",
        ],
        r,
    );
    a
}

fn version_control(o: &Obj<'_>, channels: &[&str], r: &mut Report) -> VersionControl {
    let mut v = VersionControl {
        release_channel: "stable".into(),
        ..Default::default()
    };
    if let Some(ch) = o.string("release_channel", false, r) {
        if channels.contains(&ch.as_str()) {
            v.release_channel = ch;
        } else {
            let allowed: Vec<String> = channels.iter().map(|c| format!("{c:?}")).collect();
            r.error(
                &o.at("release_channel"),
                format!(
                    "release channel {ch:?} is not allowed here: expected {}",
                    allowed.join(" or ")
                ),
            );
        }
    }
    if let Some(pv) = o.string("pin_version", false, r) {
        if !pv.is_empty() && semver::Version::parse(&pv).is_err() {
            r.error(
                &o.at("pin_version"),
                format!("pin_version {pv:?} is not a semantic version X.Y.Z[-pre][+build]"),
            );
        }
        v.pin_version = pv;
    }
    if let Some(url) = o.string("pin_url", false, r) {
        if !url.is_empty() {
            if let Err(e) = check_url(&url) {
                r.error(&o.at("pin_url"), e.to_string());
            }
        }
        v.pin_url = url;
    }
    if !v.pin_url.is_empty() && !v.pin_version.is_empty() {
        r.warn(
            &o.at("pin_version"),
            "both pin_url and pin_version are set: pin_url is used",
        );
    }
    v
}

/// Why a URL is refused; each names the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlError {
    Spaces(String),
    FileNotAbsolute(String),
    Scheme(String),
    NoHost(String),
}

impl std::fmt::Display for UrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UrlError::Spaces(url) => {
                write!(
                    f,
                    "URL {url:?} must not contain spaces or control characters"
                )
            }
            UrlError::FileNotAbsolute(url) => {
                write!(
                    f,
                    "file URL {url:?} must name an absolute path (file:///...)"
                )
            }
            UrlError::Scheme(url) => {
                write!(
                    f,
                    "URL {url:?} must start with https://, http:// or file://"
                )
            }
            UrlError::NoHost(url) => write!(f, "URL {url:?} has no host"),
        }
    }
}

impl std::error::Error for UrlError {}

/// Accepts `https://host...`, `http://host...` (explicit plain http) and `file:///path`.
pub(crate) fn check_url(url: &str) -> Result<(), UrlError> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UrlError::Spaces(url.to_string()));
    }
    let rest = if let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    {
        rest
    } else if let Some(path) = url.strip_prefix("file://") {
        return if path.starts_with('/') {
            Ok(())
        } else {
            Err(UrlError::FileNotAbsolute(url.to_string()))
        };
    } else {
        return Err(UrlError::Scheme(url.to_string()));
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        return Err(UrlError::NoHost(url.to_string()));
    }
    Ok(())
}

/// The hawkBit backend: a server URL the DDI paths are appended to, and the tenant and
/// controller id that become path segments (so only URL-safe characters, no `/`).
fn hawkbit(o: &Obj<'_>, r: &mut Report) -> Option<HawkbitSettings> {
    let server_url = o.name("server_url", r).and_then(|url| {
        let checked = if url.starts_with("file://") {
            Err(format!(
                "server URL {url:?} must start with https:// or http://"
            ))
        } else if url.contains(['?', '#']) {
            Err(format!(
                "server URL {url:?} must not have a query or fragment"
            ))
        } else {
            check_url(&url).map_err(|e| e.to_string())
        };
        match checked {
            Ok(()) => Some(url.trim_end_matches('/').to_string()),
            Err(e) => {
                r.error(&o.at("server_url"), e);
                None
            }
        }
    });
    let segment = |key: &str, r: &mut Report| {
        let s = o.name(key, r)?;
        let ok = s.len() <= 128
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~:".contains(&b));
        if ok {
            Some(s)
        } else {
            r.error(
                &o.at(key),
                format!("{s:?} must be 1 to 128 of A-Z a-z 0-9 - . _ ~ : (it becomes a part of the DDI path)"),
            );
            None
        }
    };
    let tenant = segment("tenant", r);
    let controller_id = segment("controller_id", r);
    let auth = match o.string("auth", true, r).as_deref() {
        Some("target-token") => Some(HawkbitAuth::TargetToken),
        Some("gateway-token") => Some(HawkbitAuth::GatewayToken),
        Some(other) => {
            r.error(
                &o.at("auth"),
                format!(
                    "auth {other:?} is not known: expected \"target-token\" or \"gateway-token\""
                ),
            );
            None
        }
        None => None,
    };
    // A token written here by mistake is refused (the config is not kept like a secret),
    // scrubbed from the logs, and not kept with the unknown keys.
    const TOKEN_KEYS: [&str; 3] = ["token", "target_token", "gateway_token"];
    for key in TOKEN_KEYS {
        if let Some(v) = o.map.get(key) {
            if let Some(t) = v.as_str().filter(|t| !t.is_empty()) {
                r.secrets.push(t.to_string());
            }
            r.error(
                &o.at(key),
                "the hawkBit token does not belong in the machine config: put it in the 0600 token file (docs/hawkbit.md)",
            );
        }
    }
    let auto_confirm = o.boolean("auto_confirm", r).unwrap_or(false);
    let board = hawkbit_board(o, r);
    let mut extra = o.extra(
        &[
            "server_url",
            "tenant",
            "controller_id",
            "auth",
            "auto_confirm",
            "board",
        ],
        r,
    );
    extra.retain(|k, _| !TOKEN_KEYS.contains(&k.as_str()));
    Some(HawkbitSettings {
        server_url: server_url?,
        tenant: tenant?,
        controller_id: controller_id?,
        auth: auth?,
        auto_confirm,
        board: board?,
        extra,
    })
}

/// `hawkbit.board`: sent as `hw_boardname`, which gooseBit compares byte for byte with an
/// image's board (a RAUC bundle's `compatible`), so a value that cannot be one is refused
/// here rather than leaving the machine silently offered nothing. `Some(None)`: not set.
fn hawkbit_board(o: &Obj<'_>, r: &mut Report) -> Option<Option<String>> {
    const MAX: usize = 128;
    if o.get("board").is_none() {
        return Some(None);
    }
    // A wrong type is reported by `string`.
    let b = o.string("board", false, r)?;
    let why = if b.is_empty() {
        Some("must not be empty (omit it to send the architecture)".to_string())
    } else if b.len() > MAX {
        Some(format!("is {} bytes; at most {MAX}", b.len()))
    } else if let Some(c) = b.chars().find(|c| c.is_control()) {
        Some(format!("has the control character U+{:04X}", c as u32))
    } else if b.trim() != b {
        Some("starts or ends with white space".to_string())
    } else {
        None
    };
    match why {
        None => Some(Some(b)),
        Some(why) => {
            r.error(
                &o.at("board"),
                format!("board {why}: it is the hw_boardname the server matches images by (a RAUC compatible string, or the architecture)"),
            );
            None
        }
    }
}

/// `svc-agent.logs`: levels by name, a wait bounded to a day (a line older than that is
/// news to nobody, and the queue's cap bounds what waits anyway).
/// `svc-agent.updates`: the delta fall-back rule and the byte budget (docs/updates.md).
fn update_settings(u: &Obj<'_>, r: &mut Report) -> UpdateSettings {
    let mut s = UpdateSettings::default();
    if let Some(b) = u.object("budget", r) {
        let budget = BudgetSettings {
            day_bytes: b.uint("day_bytes", r),
            month_bytes: b.uint("month_bytes", r),
        };
        b.extra(&["day_bytes", "month_bytes"], r);
        if budget.day_bytes.is_none() && budget.month_bytes.is_none() {
            r.error(
                &u.at("budget"),
                "a budget names day_bytes, month_bytes or both (omit it for no budget)",
            );
        } else {
            s.budget = Some(budget);
        }
    }
    if let Some(rule) = u.string("delta_fallback", false, r) {
        match rule.as_str() {
            "full" | "never" => s.delta_fallback = rule,
            "budget" if s.budget.is_some() => s.delta_fallback = rule,
            "budget" => r.error(
                &u.at("delta_fallback"),
                "delta_fallback \"budget\" needs a budget (svc-agent.updates.budget with day_bytes or month_bytes)",
            ),
            _ => r.error(
                &u.at("delta_fallback"),
                format!(
                    "delta_fallback {rule:?} is not known: expected \"full\", \"budget\" or \"never\""
                ),
            ),
        }
    }
    s.extra = u.extra(&["delta_fallback", "budget"], r);
    s
}

fn log_settings(o: &Obj<'_>, r: &mut Report) -> LogSettings {
    let mut s = LogSettings::default();
    for key in ["level", "urgent_level"] {
        if let Some(level) = o.string(key, false, r) {
            if crate::logging::Level::from_name(&level).is_some() {
                if key == "level" {
                    s.level = level;
                } else {
                    s.urgent_level = level;
                }
            } else {
                r.error(
                    &o.at(key),
                    format!("log level {level:?} is not known: expected \"error\", \"warn\", \"info\" or \"debug\""),
                );
            }
        }
    }
    if let Some(secs) = o.uint("max_wait_secs", r) {
        if secs > 86_400 {
            r.error(
                &o.at("max_wait_secs"),
                format!("max_wait_secs {secs} is above a day (86400)"),
            );
        } else {
            s.max_wait_secs = secs;
        }
    }
    s.extra = o.extra(&["level", "urgent_level", "max_wait_secs"], r);
    s
}

fn server(o: &Obj<'_>, r: &mut Report) -> ServerSection {
    let mut s = ServerSection {
        version: version_control(o, &["stable", "latest"], r),
        ..Default::default()
    };
    s.disable_subsystem = o.boolean("disable_subsystem", r).unwrap_or(false);
    if let Some(a) = o.object("attributes", r) {
        s.attributes.fast_start = a.boolean("fast_start", r).unwrap_or(false);
        if let Some(w) = a.object("maintenance_window", r) {
            s.attributes.maintenance_window = maintenance_window(&w, r);
        }
        s.attributes.extra = a.extra(&["fast_start", "maintenance_window"], r);
    }
    s.extra = o.extra(
        &[
            "release_channel",
            "pin_version",
            "pin_url",
            "disable_subsystem",
            "attributes",
        ],
        r,
    );
    s
}

fn hhmm(o: &Obj<'_>, key: &str, r: &mut Report) -> Option<u16> {
    let s = o.string(key, true, r)?;
    let parsed = s.split_once(':').and_then(|(h, m)| {
        // Two digits each: `parse` alone would take "+1".
        let ok =
            h.len() == 2 && m.len() == 2 && (h.to_owned() + m).bytes().all(|b| b.is_ascii_digit());
        let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
        (ok && h < 24 && m < 60).then_some(h * 60 + m)
    });
    if parsed.is_none() {
        r.error(
            &o.at(key),
            format!("{s:?} is not a local time HH:MM (00:00 to 23:59)"),
        );
    }
    parsed
}

fn maintenance_window(o: &Obj<'_>, r: &mut Report) -> Option<MaintenanceWindow> {
    let mut days = Vec::new();
    let mut days_ok = true;
    if let Some(list) = o.array("days", r) {
        for (i, d) in list.iter().enumerate() {
            match d.as_str().and_then(day_index) {
                Some(day) if !days.contains(&day) => days.push(day),
                Some(_) => {}
                None => {
                    days_ok = false;
                    r.error(
                        &o.at("days").idx(i),
                        format!(
                            "{} is not a day of the week (mon, tue, wed, thu, fri, sat, sun)",
                            describe(d)
                        ),
                    );
                }
            }
        }
        if list.is_empty() {
            r.error(
                &o.at("days"),
                "an empty list of days would never allow maintenance; omit it for every day",
            );
            days_ok = false;
        }
    } else {
        days = (0..7).collect();
    }
    days.sort_unstable();
    let start = hhmm(o, "start", r);
    let end = hhmm(o, "end", r);
    let _ = o.extra(&["days", "start", "end"], r);
    // `end == start` is a whole day from `start` (see MaintenanceWindow::allows).
    let (start, end) = (start?, end?);
    days_ok.then_some(MaintenanceWindow { days, start, end })
}

/// `mon` or `monday` to 0; Sunday is 6.
fn day_index(name: &str) -> Option<u8> {
    (0..7u8).find(|&i| name == DAY_NAMES[i as usize] || name == DAY_FULL[i as usize])
}

const DAY_FULL: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// Whether `pw` is one of the well-known default passwords (any case): the provisioning
/// hotspot never comes up with one (anyone in radio range would know it).
pub(crate) fn is_well_known_password(pw: &str) -> bool {
    WEAK_PASSWORDS.contains(&pw.to_ascii_lowercase().as_str())
}

/// Well-known default passwords that must be changed on a real device.
const WEAK_PASSWORDS: [&str; 8] = [
    "password",
    "12345678",
    "123456789",
    "viamsetup",
    "svc-setup",
    "change-me-per-device",
    "admin123",
    "qwertyui",
];

fn provisioning(o: &Obj<'_>, lists: NetworkLists<'_>, r: &mut Report) -> ProvisioningSection {
    let mut p = ProvisioningSection {
        disable_subsystem: o.boolean("disable_subsystem", r).unwrap_or(false),
        ..Default::default()
    };
    if let Some(list) = lists.section.filter(|raw| !is_null(raw)) {
        p.networks = networks(list, &o.at("networks"), r);
    }
    if let Some(a) = o.object("attributes", r) {
        let at = &mut p.attributes;
        if let Some(pw) = a.string("hotspot_password", false, r) {
            r.secrets.push(pw.clone());
            if !(8..=63).contains(&pw.len()) || !pw.bytes().all(|b| (0x20..0x7f).contains(&b)) {
                r.error(
                    &a.at("hotspot_password"),
                    "the hotspot password must be 8 to 63 printable ASCII characters (WPA2)",
                );
            } else if is_well_known_password(&pw) {
                // A warning, not an error: the rest of the file still applies (a shipped
                // image keeps its manufacturer settings); the hotspot alone stays off.
                r.warn(
                    &a.at("hotspot_password"),
                    "the hotspot password is a well-known default: the provisioning hotspot will not start with it; set a per-device password (docs/provisioning.md)",
                );
            }
            at.hotspot_password = Some(pw);
        }
        at.roaming_mode = a.boolean("roaming_mode", r);
        if let Some(list) = lists.attributes.filter(|raw| !is_null(raw)) {
            at.networks = Some(networks(list, &a.at("networks"), r));
        }
        if let Some(prefix) = a.string("hotspot_prefix", false, r) {
            if prefix.is_empty() || prefix.len() > 20 {
                r.error(
                    &a.at("hotspot_prefix"),
                    "the hotspot SSID prefix must be 1 to 20 bytes (the SSID is <prefix>-<hostname>, at most 32)",
                );
            }
            at.hotspot_prefix = Some(prefix);
        }
        at.offline_timeout_secs = a.uint("offline_timeout_secs", r);
        at.user_idle_timeout_secs = a.uint("user_idle_timeout_secs", r);
        at.retry_networks_secs = a.uint("retry_networks_secs", r);
        // "" means "not set" (the built-in internet check), as the schema and the shipped
        // defaults file have it.
        if let Some(url) = a.string("check_url", false, r).filter(|u| !u.is_empty()) {
            if let Err(e) = check_url(&url) {
                r.error(&a.at("check_url"), e.to_string());
            }
            at.check_url = Some(url);
        }
        at.manufacturer = a.string("manufacturer", false, r);
        at.model = a.string("model", false, r);
        at.hotspot_enabled = a.boolean("hotspot_enabled", r);
        at.dpp_enabled = a.boolean("dpp_enabled", r);
        at.ble_enabled = a.boolean("ble_enabled", r);
        at.improv_button = a
            .object("improv_button", r)
            .and_then(|b| improv_button(&b, r));
        at.extra = a.extra(
            &[
                "hotspot_password",
                "roaming_mode",
                "networks",
                "hotspot_prefix",
                "offline_timeout_secs",
                "user_idle_timeout_secs",
                "retry_networks_secs",
                "check_url",
                "manufacturer",
                "model",
                "hotspot_enabled",
                "dpp_enabled",
                "ble_enabled",
                "improv_button",
            ],
            r,
        );
    }
    p.extra = o.extra(&["disable_subsystem", "networks", "attributes"], r);
    p
}

/// A raw `networks` list, one network parsed at a time (see [`NetworkLists`]).
fn networks(list: Raw<'_>, path: &Ptr, r: &mut Report) -> Vec<Network> {
    let mut out: Vec<Network> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (i, item) in raw_array(list, path, r).into_iter().enumerate() {
        let p = path.idx(i);
        let Some(v) = tree(item, &p, r) else {
            continue;
        };
        if let Some(n) = network(&v, &p, r) {
            if !seen.insert(n.ssid.clone()) {
                r.warn(
                    &p.key("ssid"),
                    format!(
                        "network {:?} is listed more than once; the first entry is used",
                        n.ssid
                    ),
                );
            }
            out.push(n);
        }
    }
    out
}

/// A WPA pass key: 8 to 63 printable ASCII characters, or exactly 64 hex digits.
pub(crate) fn check_psk(psk: &str) -> Result<(), &'static str> {
    let printable = psk.bytes().all(|b| (0x20..0x7f).contains(&b));
    let hex64 = psk.len() == 64 && psk.bytes().all(|b| b.is_ascii_hexdigit());
    if hex64 || (printable && (8..=63).contains(&psk.len())) {
        Ok(())
    } else {
        Err("psk must be 8 to 63 printable ASCII characters, or 64 hex digits")
    }
}

/// An SSID: 1 to 32 bytes.
pub(crate) fn check_ssid(ssid: &str) -> Result<(), &'static str> {
    if ssid.is_empty() || ssid.len() > 32 {
        Err("ssid must be 1 to 32 bytes")
    } else {
        Ok(())
    }
}

fn network(v: &Value, path: &Ptr, r: &mut Report) -> Option<Network> {
    let o = Obj::new(v, path, "a network", r)?;
    let net_type = o.string("type", false, r).unwrap_or_else(|| "wifi".into());
    if net_type != "wifi" {
        r.error(
            &o.at("type"),
            format!("network type {net_type:?} is not allowed: expected \"wifi\""),
        );
    }
    let ssid = o.string("ssid", true, r);
    if let Some(s) = &ssid {
        if let Err(e) = check_ssid(s) {
            r.error(&o.at("ssid"), format!("{e} (found {})", s.len()));
        }
    }
    let psk = o.string("psk", false, r);
    if let Some(k) = &psk {
        r.secrets.push(k.clone());
        if let Err(e) = check_psk(k) {
            r.error(&o.at("psk"), e);
        }
    }
    let priority = match o.get("priority") {
        None => 0,
        Some(v) => match integer(v) {
            Some(n) if (-999..=999).contains(&n) => n as i32,
            _ => {
                r.error(
                    &o.at("priority"),
                    format!(
                        "priority must be an integer from -999 to 999, found {}",
                        describe(v)
                    ),
                );
                0
            }
        },
    };
    let hidden = o.boolean("hidden", r).unwrap_or(false);
    let eap = o.object("eap", r).and_then(|e| eap(&e, r));
    if eap.is_some() && psk.is_some() {
        r.error(
            &o.at("psk"),
            "a network with eap (802.1X) takes no psk: give one or the other",
        );
    }
    let extra = o.extra(&["type", "ssid", "psk", "priority", "hidden", "eap"], r);
    Some(Network {
        net_type,
        ssid: ssid?,
        psk,
        priority,
        hidden,
        eap,
        extra,
    })
}

/// A network's 802.1X settings (docs/config.md, "Enterprise Wi-Fi"): each problem at its
/// own pointer; `None` when the method itself is unusable.
fn eap(o: &Obj<'_>, r: &mut Report) -> Option<Eap> {
    use super::eap_rules as e;
    let method = o
        .string("method", true, r)
        .and_then(|m| match e::parse_method(&m) {
            Ok(m) => Some(m),
            Err(msg) => {
                r.error(&o.at("method"), msg);
                None
            }
        });
    let text = |key: &str, required: bool, secret: bool, r: &mut Report| {
        let v = o.string(key, required, r)?;
        if secret {
            r.secrets.push(v.clone());
        }
        Some(v)
    };
    let identity = text("identity", true, false, r);
    let anonymous_identity = text("anonymous_identity", false, false, r);
    for (key, v) in [
        ("identity", &identity),
        ("anonymous_identity", &anonymous_identity),
    ] {
        if let Some(Err(msg)) = v.as_deref().map(e::check_identity) {
            r.error(&o.at(key), msg);
        }
    }
    let password = text("password", false, true, r);
    let private_key_password = text("private_key_password", false, true, r);
    for (key, v) in [
        ("password", &password),
        ("private_key_password", &private_key_password),
    ] {
        if let Some(Err(msg)) = v.as_deref().map(e::check_password) {
            r.error(&o.at(key), msg);
        }
    }
    let phase2 = text("phase2", false, false, r);
    let domain = text("domain", false, false, r);
    if let Some(Err(msg)) = domain.as_deref().map(e::check_domain) {
        r.error(&o.at("domain"), msg);
    }
    let ca_cert = text("ca_cert", false, false, r);
    let client_cert = text("client_cert", false, false, r);
    let private_key = text("private_key", false, true, r);
    for (key, v, is_key) in [
        ("ca_cert", &ca_cert, false),
        ("client_cert", &client_cert, false),
        ("private_key", &private_key, true),
    ] {
        if let Some(Err(msg)) = v.as_deref().map(|t| e::check_pem(t, is_key)) {
            r.error(&o.at(key), msg);
        }
    }
    // Without a server check any access point could collect the password (or the
    // identity): one of the two is required.
    if ca_cert.is_none() && domain.is_none() {
        r.error(
            &o.path,
            "the server must be checked: give ca_cert, domain or both",
        );
    }
    o.extra(
        &[
            "method",
            "identity",
            "anonymous_identity",
            "password",
            "phase2",
            "ca_cert",
            "domain",
            "client_cert",
            "private_key",
            "private_key_password",
        ],
        r,
    );
    let method = method?;
    let need = |key: &str, v: &Option<String>, r: &mut Report| {
        if v.is_none() {
            r.error(
                &o.at(key),
                format!("required with method {:?}", method.nm_name()),
            );
        }
    };
    let refuse = |key: &str, v: &Option<String>, r: &mut Report| {
        if v.is_some() {
            r.error(
                &o.at(key),
                format!("not used with method {:?}", method.nm_name()),
            );
        }
    };
    match method {
        EapMethod::Tls => {
            need("client_cert", &client_cert, r);
            need("private_key", &private_key, r);
            refuse("password", &password, r);
            refuse("phase2", &phase2, r);
        }
        EapMethod::Peap | EapMethod::Ttls => {
            need("password", &password, r);
            refuse("client_cert", &client_cert, r);
            refuse("private_key", &private_key, r);
            refuse("private_key_password", &private_key_password, r);
            if let Some(p) = &phase2 {
                let allowed = e::phase2_allowed(method);
                if !allowed.contains(&p.as_str()) {
                    r.error(
                        &o.at("phase2"),
                        format!(
                            "phase2 {p:?} is not offered with {:?}: expected one of {}",
                            method.nm_name(),
                            allowed.join(", ")
                        ),
                    );
                }
            }
        }
    }
    Some(Eap {
        method,
        identity: identity?,
        anonymous_identity,
        password,
        phase2,
        ca_cert,
        domain,
        client_cert,
        private_key,
        private_key_password,
    })
}

/// The Improv button (`attributes.improv_button`): exactly one of `device` (a path under
/// `/dev/input/`) and `name`, and `key` (a Linux key code or its `KEY_`/`BTN_` name).
fn improv_button(o: &Obj<'_>, r: &mut Report) -> Option<ImprovButton> {
    let device = o.string("device", false, r);
    let name = o.string("name", false, r);
    if let Some(d) = &device {
        if !d.starts_with("/dev/input/") || d.contains("/../") || d.ends_with("/..") {
            r.error(&o.at("device"), "must be a path under /dev/input/");
        }
    }
    if let Some(n) = &name {
        if n.is_empty() || n.len() > 255 || n.chars().any(char::is_control) {
            r.error(
                &o.at("name"),
                "must be 1 to 255 bytes without control characters",
            );
        }
    }
    if device.is_some() == name.is_some() {
        r.error(&o.path, "give exactly one of device and name");
    }
    let key = match o.get("key") {
        None => {
            r.error(
                &o.at("key"),
                "required field is missing (a key code or name)",
            );
            None
        }
        Some(v) => match super::input_keys::key_code(v) {
            Ok(k) => Some(k),
            Err(e) => {
                r.error(&o.at("key"), e);
                None
            }
        },
    };
    o.extra(&["device", "name", "key"], r);
    Some(ImprovButton {
        device,
        name,
        key: key?,
    })
}

fn syscfg(o: &Obj<'_>, r: &mut Report) -> SyscfgSection {
    let mut s = SyscfgSection {
        disable_subsystem: o.boolean("disable_subsystem", r).unwrap_or(false),
        ..Default::default()
    };
    if let Some(a) = o.object("attributes", r) {
        if let Some(l) = a.object("logging", r) {
            let lg = &mut s.attributes.logging;
            lg.disable = l.boolean("disable", r).unwrap_or(false);
            for key in ["system_max_use", "runtime_max_use"] {
                if let Some(size) = l.string(key, false, r) {
                    if !is_journald_size(&size) {
                        r.error(
                            &l.at(key),
                            format!("{size:?} is not a journald size: a number with an optional K, M, G, T, P or E suffix (e.g. \"512M\")"),
                        );
                    }
                    if key == "system_max_use" {
                        lg.system_max_use = Some(size);
                    } else {
                        lg.runtime_max_use = Some(size);
                    }
                }
            }
            lg.extra = l.extra(&["disable", "system_max_use", "runtime_max_use"], r);
        }
        if let Some(u) = a.object("upgrades", r) {
            s.attributes.upgrades.upgrade_type = match u.string("type", false, r).as_deref() {
                Some("all") => Some(UpgradeType::All),
                Some("security") => Some(UpgradeType::Security),
                Some("none") => Some(UpgradeType::None),
                Some(other) => {
                    r.error(
                        &u.at("type"),
                        format!("upgrades type {other:?} is not allowed: expected \"all\", \"security\" or \"none\""),
                    );
                    None
                }
                None => None,
            };
            s.attributes.upgrades.extra = u.extra(&["type"], r);
        }
        s.attributes.extra = a.extra(&["logging", "upgrades"], r);
    }
    s.extra = o.extra(&["disable_subsystem", "attributes"], r);
    s
}

/// journald's size syntax (`parse_size`): a decimal number and an optional 1024-based
/// suffix B, K, M, G, T, P or E.
pub(crate) fn is_journald_size(s: &str) -> bool {
    let num = s
        .strip_suffix(['B', 'K', 'M', 'G', 'T', 'P', 'E'])
        .unwrap_or(s);
    let (int, frac) = num.split_once('.').unwrap_or((num, "0"));
    !int.is_empty()
        && int.len() <= 18
        && !frac.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

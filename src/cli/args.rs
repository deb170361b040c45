//! A tiny argument reader: `--flag`, `--key value`, `--key=value` and positionals.
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Parsed arguments of one subcommand, checked against what it accepts.
#[derive(Debug, Default)]
pub(crate) struct Args {
    flags: Vec<String>,
    values: Vec<(String, String)>,
    pub positional: Vec<String>,
}

impl Args {
    /// `flags` take no value; `options` take one.
    pub(crate) fn parse(
        args: &[String],
        flags: &[&str],
        options: &[&str],
    ) -> Result<Args, UsageError> {
        let mut out = Args::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "--" {
                out.positional.extend(it.by_ref().cloned());
                break;
            }
            if let Some(name) = a.strip_prefix("--") {
                let (name, inline) = match name.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (name, None),
                };
                if flags.contains(&name) && inline.is_none() {
                    out.flags.push(name.to_string());
                } else if options.contains(&name) {
                    let v = match inline {
                        Some(v) => v,
                        None => it
                            .next()
                            .cloned()
                            .ok_or_else(|| UsageError(format!("--{name} needs a value")))?,
                    };
                    out.values.push((name.to_string(), v));
                } else {
                    return Err(UsageError(format!("unknown option --{name}")));
                }
            } else if a.len() > 1 && a.starts_with('-') {
                if a == "-h" {
                    out.flags.push("help".into());
                } else {
                    return Err(UsageError(format!("unknown option {a}")));
                }
            } else {
                out.positional.push(a.clone());
            }
        }
        Ok(out)
    }

    pub(crate) fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    pub(crate) fn value(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn required(&self, name: &str) -> Result<&str, UsageError> {
        self.value(name)
            .ok_or_else(|| UsageError(format!("--{name} is required")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn reads_flags_options_and_positionals() {
        let a = Args::parse(
            &s(&["--json", "--module=m", "--config", "f.json", "x"]),
            &["json"],
            &["module", "config"],
        )
        .unwrap();
        assert!(a.flag("json"));
        assert_eq!(a.value("module"), Some("m"));
        assert_eq!(a.value("config"), Some("f.json"));
        assert_eq!(a.positional, vec!["x"]);
        assert!(Args::parse(&s(&["--nope"]), &[], &[]).is_err());
        assert!(Args::parse(&s(&["--config"]), &[], &["config"]).is_err());
    }
}

//! Validation diagnostics: each names a JSON pointer (RFC 6901) and what was expected.
use serde::{Deserialize, Serialize};
use std::fmt;

/// One problem found in a config, at a JSON pointer path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub path: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "(root)"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

/// Every error and warning of one validation run, in document order.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
    /// Secrets met on the way (pass keys, passwords), registered with the log scrubber in
    /// one batch when validation ends.
    #[serde(skip)]
    pub(crate) secrets: Vec<String>,
}

impl Report {
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
    pub(crate) fn error(&mut self, path: &Ptr, message: impl Into<String>) {
        self.errors.push(Diagnostic {
            path: path.to_string(),
            message: message.into(),
        });
    }
    pub(crate) fn warn(&mut self, path: &Ptr, message: impl Into<String>) {
        self.warnings.push(Diagnostic {
            path: path.to_string(),
            message: message.into(),
        });
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.errors {
            writeln!(f, "error: {e}")?;
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        Ok(())
    }
}

/// A JSON pointer under construction; cheap to extend while walking a document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ptr(String);

impl Ptr {
    pub(crate) fn root() -> Self {
        Ptr(String::new())
    }
    /// The pointer to member `key` of this object (escaping `~` and `/`).
    pub(crate) fn key(&self, key: &str) -> Ptr {
        // One allocation: pointers are made for every member of every component.
        let mut p = String::with_capacity(self.0.len() + 1 + key.len());
        p.push_str(&self.0);
        p.push('/');
        if key.contains(['~', '/']) {
            p.push_str(&key.replace('~', "~0").replace('/', "~1"));
        } else {
            p.push_str(key);
        }
        Ptr(p)
    }
    /// The pointer to element `i` of this array.
    pub(crate) fn idx(&self, i: usize) -> Ptr {
        use std::fmt::Write;
        let mut p = String::with_capacity(self.0.len() + 8);
        p.push_str(&self.0);
        let _ = write!(p, "/{i}");
        Ptr(p)
    }
}

impl fmt::Display for Ptr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_pointer_tokens() {
        assert_eq!(
            Ptr::root().key("a/b").key("m~n").idx(3).to_string(),
            "/a~1b/m~0n/3"
        );
    }
}

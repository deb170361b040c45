//! Module version selectors and version selection (spec §9.1).
//!
//! | selector | update type | moves to |
//! |---|---|---|
//! | `X.Y.Z` | Patch | exactly X.Y.Z (even an older one), never anything else |
//! | `X.Y.*` | Minor | newest release X.Y.n |
//! | `X.*` | Major | newest release X.n.m |
//! | `latest` | Latest | newest release |
//! | `latest-with-prerelease` | Latest with prerelease | newest release or prerelease |
//!
//! Within a selector's range a module only moves up; a current version outside the range
//! (the config was changed) moves to the best version in range.
use semver::Version;
use serde::{Serialize, Serializer};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    Exact(Version),
    Minor(u64, u64),
    Major(u64),
    Latest,
    LatestWithPrerelease,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorError(pub String);

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid version selector {:?}: expected X.Y.Z, X.Y.*, X.*, latest or latest-with-prerelease",
            self.0
        )
    }
}

impl std::error::Error for SelectorError {}

fn number(s: &str) -> Option<u64> {
    // semver forbids leading zeros and signs; so do we.
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return None;
    }
    s.parse().ok()
}

impl std::str::FromStr for Selector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || SelectorError(s.to_string());
        match s {
            "latest" => return Ok(Selector::Latest),
            "latest-with-prerelease" => return Ok(Selector::LatestWithPrerelease),
            _ => {}
        }
        let parts: Vec<&str> = s.split('.').collect();
        match parts.as_slice() {
            [major, "*"] => Ok(Selector::Major(number(major).ok_or_else(err)?)),
            [major, minor, "*"] => Ok(Selector::Minor(
                number(major).ok_or_else(err)?,
                number(minor).ok_or_else(err)?,
            )),
            _ => Version::parse(s).map(Selector::Exact).map_err(|_| err()),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Exact(v) => write!(f, "{v}"),
            Selector::Minor(a, b) => write!(f, "{a}.{b}.*"),
            Selector::Major(a) => write!(f, "{a}.*"),
            Selector::Latest => f.write_str("latest"),
            Selector::LatestWithPrerelease => f.write_str("latest-with-prerelease"),
        }
    }
}

impl Serialize for Selector {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Selector {
    /// Whether `v` lies in this selector's range.
    pub(crate) fn admits(&self, v: &Version) -> bool {
        match self {
            Selector::Exact(e) => v == e,
            Selector::Minor(a, b) => v.pre.is_empty() && v.major == *a && v.minor == *b,
            Selector::Major(a) => v.pre.is_empty() && v.major == *a,
            Selector::Latest => v.pre.is_empty(),
            Selector::LatestWithPrerelease => true,
        }
    }

    /// The version to move to from `current` given the registry's `available` versions,
    /// or `None` to stay.
    ///
    /// "Newer" is SemVer precedence, in which build metadata has no part: 1.2.3+b2 is not
    /// newer than 1.2.3 (`Version`'s `Ord` would say it is). Among equals the choice is
    /// still deterministic (`Ord` breaks the tie).
    pub(crate) fn resolve(
        &self,
        current: Option<&Version>,
        available: &[Version],
    ) -> Option<Version> {
        let best = available
            .iter()
            .filter(|v| self.admits(v))
            .max_by(|a, b| a.cmp_precedence(b).then_with(|| a.cmp(b)))?;
        match current {
            Some(cur) if self.admits(cur) && best.cmp_precedence(cur).is_le() => None,
            Some(cur) if cur == best => None,
            _ => Some(best.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vs(list: &str) -> Vec<Version> {
        list.split(',')
            .map(|v| Version::parse(v).unwrap())
            .collect()
    }

    const REGISTRY: &str = "1.2.3,1.2.4,1.2.5,1.3.0,2.0.0,2.1.0-rc.1";

    fn pick(sel: &str, current: &str) -> String {
        let sel: Selector = sel.parse().unwrap();
        let cur = (!current.is_empty()).then(|| Version::parse(current).unwrap());
        sel.resolve(cur.as_ref(), &vs(REGISTRY))
            .map(|v| v.to_string())
            .unwrap_or_else(|| "none".into())
    }

    #[test]
    fn spec_examples_table() {
        let cases = [
            // Patch never moves away from its version...
            ("1.2.3", "1.2.3", "none"),
            // ...but a past patch may be selected on purpose.
            ("1.2.3", "1.2.5", "1.2.3"),
            ("1.2.3", "", "1.2.3"),
            ("9.9.9", "1.2.3", "none"),
            // Minor: 1.2.3 may move to 1.2.4 or 1.2.5, not to 1.3.0 or 2.0.0.
            ("1.2.*", "1.2.3", "1.2.5"),
            ("1.2.*", "1.2.5", "none"),
            ("1.2.*", "1.3.0", "1.2.5"),
            // Major: 1.2.3 may move to 1.2.4 or 1.3.0, not to 2.0.0.
            ("1.*", "1.2.3", "1.3.0"),
            ("1.*", "1.3.0", "none"),
            ("1.*", "2.0.0", "1.3.0"),
            ("3.*", "1.2.3", "none"),
            // Latest: the newest release; prereleases only with the prerelease type.
            ("latest", "1.2.3", "2.0.0"),
            ("latest", "2.0.0", "none"),
            ("latest", "", "2.0.0"),
            ("latest", "2.1.0-rc.1", "2.0.0"),
            ("latest-with-prerelease", "1.2.3", "2.1.0-rc.1"),
            ("latest-with-prerelease", "2.1.0-rc.1", "none"),
            ("latest-with-prerelease", "3.0.0", "none"),
        ];
        for (sel, cur, want) in cases {
            assert_eq!(pick(sel, cur), want, "selector {sel} from {cur:?}");
        }
    }

    #[test]
    fn build_metadata_is_not_newer() {
        let s: Selector = "latest".parse().unwrap();
        let cur = Version::parse("1.2.3").unwrap();
        assert_eq!(s.resolve(Some(&cur), &vs("1.2.3+b2")), None);
        let s: Selector = "1.2.*".parse().unwrap();
        assert_eq!(s.resolve(Some(&cur), &vs("1.2.3+b1,1.2.3+b9")), None);
        assert_eq!(
            s.resolve(Some(&cur), &vs("1.2.3+b9,1.2.4+b1")),
            Some(Version::parse("1.2.4+b1").unwrap())
        );
    }

    #[test]
    fn minor_and_major_never_pick_prereleases() {
        let avail = vs("1.2.3,1.2.4-beta.1,1.3.0-rc.1");
        let s: Selector = "1.*".parse().unwrap();
        assert_eq!(s.resolve(None, &avail), Some(Version::new(1, 2, 3)));
    }

    #[test]
    fn parses_and_prints_every_form() {
        for s in [
            "1.2.3",
            "1.2.*",
            "1.*",
            "latest",
            "latest-with-prerelease",
            "1.0.0-rc.1",
        ] {
            assert_eq!(s.parse::<Selector>().unwrap().to_string(), s);
        }
        for bad in [
            "", "1", "1.2", "*", "1.*.*", "01.2.3", "1.02.*", "v1.2.3", "x.*", "-1.*", "latest ",
        ] {
            assert!(bad.parse::<Selector>().is_err(), "{bad:?} accepted");
        }
    }
}

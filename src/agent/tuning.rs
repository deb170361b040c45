//! The daemon's settings from its environment, read once at start into one value: the steps
//! and the loop read this, never the environment.
use crate::osimage::GatePolicy;
use crate::update::ProbationPolicy;
use std::time::Duration;

/// Without fast start: how long the agent waits for the network and one update check
/// before it starts svc-server from what it has.
const FIRST_CONTACT_WAIT: Duration = Duration::from_secs(60);
/// How long the app may hold a poll (the long poll, docs/protocol.md); an app that does not
/// hold polls is polled every `poll_interval_secs` as before. Chosen by the traffic budget
/// (BENCHMARKS.md): one resumed TLS connection per hold. A silently dropped connection is
/// found by TCP keepalive within 5 minutes (`http::KeepAlive`), whatever the hold, so the
/// hold is as long as the budget wants: 3000 s, 100 kB a day with the keepalive probes.
const DEFAULT_HOLD_SECS: u64 = 3000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tuning {
    /// `SVC_AGENT_FAST_START` (spec §3), one of fast start's two switches.
    pub fast_start_env: Option<String>,
    /// `SVC_AGENT_FIRST_CONTACT_SECS`.
    pub first_contact: Duration,
    /// `SVC_AGENT_POLL_HOLD_SECS` (0: plain polls only).
    pub hold_secs: u64,
    /// svc-server's probation; `SVC_AGENT_PROBATION_SECS` shortens its window for tests
    /// that watch a whole probation through the real daemon.
    pub probation: ProbationPolicy,
    /// The OS image's health gate: `SVC_AGENT_PROBATION_SECS` shortens svc-server's part of
    /// it too, `SVC_AGENT_OS_GATE_SECS` its deadline.
    pub os_gate: GatePolicy,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            fast_start_env: None,
            first_contact: FIRST_CONTACT_WAIT,
            hold_secs: DEFAULT_HOLD_SECS,
            probation: ProbationPolicy::default(),
            os_gate: GatePolicy::default(),
        }
    }
}

impl Tuning {
    /// Reads the environment; a value that does not parse leaves the default.
    pub(crate) fn from_env() -> Tuning {
        Tuning::from_vars(|k| std::env::var(k).ok())
    }

    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Tuning {
        let secs = |k: &str| var(k).and_then(|v| v.parse::<u64>().ok());
        let d = Tuning::default();
        Tuning {
            fast_start_env: var("SVC_AGENT_FAST_START"),
            first_contact: secs("SVC_AGENT_FIRST_CONTACT_SECS")
                .map(Duration::from_secs)
                .unwrap_or(d.first_contact),
            hold_secs: secs("SVC_AGENT_POLL_HOLD_SECS").unwrap_or(d.hold_secs),
            probation: ProbationPolicy {
                window: secs("SVC_AGENT_PROBATION_SECS")
                    .map(Duration::from_secs)
                    .unwrap_or(d.probation.window),
                ..d.probation
            },
            os_gate: GatePolicy {
                server_up: secs("SVC_AGENT_PROBATION_SECS")
                    .map(Duration::from_secs)
                    .unwrap_or(d.os_gate.server_up),
                deadline: secs("SVC_AGENT_OS_GATE_SECS")
                    .map(Duration::from_secs)
                    .unwrap_or(d.os_gate.deadline),
                ..d.os_gate
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_override_and_garbage_keeps_the_default() {
        let t = Tuning::from_vars(|k| match k {
            "SVC_AGENT_POLL_HOLD_SECS" => Some("0".into()),
            "SVC_AGENT_PROBATION_SECS" => Some("5".into()),
            "SVC_AGENT_FIRST_CONTACT_SECS" => Some("soon".into()),
            _ => None,
        });
        assert_eq!(t.hold_secs, 0);
        assert_eq!(t.probation.window, Duration::from_secs(5));
        assert_eq!(t.os_gate.server_up, Duration::from_secs(5));
        assert_eq!(t.os_gate.deadline, GatePolicy::default().deadline);
        assert_eq!(t.probation.max_crashes, 3);
        assert_eq!(t.first_contact, FIRST_CONTACT_WAIT);
        assert_eq!(t.fast_start_env, None);
    }
}

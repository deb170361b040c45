//! Poll answers from the management app (or a `file://` directory): any bytes give an answer
//! or a protocol error, never a panic; the config inside goes through the same validator the
//! agent uses, and an answer serializes again.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::protocol::PollAnswer;

fuzz_target!(|data: &[u8]| {
    if let Ok(answer) = PollAnswer::parse(data) {
        if let Some(cfg) = &answer.config {
            if let Err(report) = svc::config::parse_value(cfg) {
                assert!(!report.errors.is_empty());
            }
        }
        serde_json::to_vec(&answer).expect("serializable");
    }
});

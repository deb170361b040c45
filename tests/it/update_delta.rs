//! Binary deltas (issue 44) through the engine against the HTTPS test server: a delta from
//! the running binary is applied and its result goes through every check of a full
//! download; a delta from another binary is never downloaded; a corrupted, wrong-result,
//! truncated or huge delta is refused, and the full artifact is downloaded only when the
//! vendor's rule allows it, noted in the records (the status) with why.
use crate::common::https::{Behavior, HttpsServer};
use crate::update_support::*;
use svc::protocol::Delta;
use svc::update::delta::Format::{V1, V2};
use svc::update::delta::{DeltaError, Miss};
use svc::update::{DeltaFallback, Engine, Kind, Staging, UpdateError, VersionRecords};

const NAME: &str = "svc-server";

struct Fixture {
    paths: svc::paths::Paths,
    server: HttpsServer,
    old: Vec<u8>,
    new: Vec<u8>,
}

fn setup(test: &str) -> Fixture {
    let server = HttpsServer::start();
    let paths = sandbox(&format!("delta-{test}"));
    let old = install_old(&paths, NAME, "1.0.0");
    let new = fake_binary(NAME, "2.0.0", "ok", 300_000);
    server.add("/full", new.clone(), Behavior::Normal);
    Fixture {
        paths,
        server,
        old,
        new,
    }
}

impl Fixture {
    /// Serves `bytes` as the delta at `/delta`, announced as they are.
    fn serve_delta(&self, bytes: Vec<u8>, from: &[u8]) -> Delta {
        self.serve_at("/delta", bytes, from, None)
    }

    /// Serves `bytes` at `path`, announced as they are, in the offer's `format`.
    fn serve_at(&self, path: &str, bytes: Vec<u8>, from: &[u8], format: Option<&str>) -> Delta {
        let d = Delta {
            from: sha256_hex(from),
            url: self.server.url(path),
            size: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
            format: format.map(str::to_string),
        };
        self.server.add(path, bytes, Behavior::Normal);
        d
    }

    fn stage(
        &self,
        deltas: &[Delta],
        rule: DeltaFallback,
    ) -> Result<Staging, svc::update::UpdateError> {
        let mut opts = test_opts();
        opts.delta_fallback = rule;
        let a = artifact(NAME, "2.0.0", &self.server.url("/full"), &self.new);
        Engine::new(self.paths.clone(), opts).stage_offer(&a, deltas)
    }

    fn requests(&self, path: &str) -> usize {
        self.server.requests(path).len()
    }

    /// The delta outcome the records (and so the status) show.
    fn noted(&self) -> (String, String) {
        let rec = VersionRecords::load(&self.paths).unwrap();
        let d = rec
            .get(NAME)
            .unwrap()
            .delta
            .clone()
            .expect("a delta outcome is recorded");
        assert_eq!(d.version, "2.0.0");
        (d.outcome, d.reason.unwrap_or_default())
    }

    fn activate_and_check(&self) {
        let e = Engine::new(self.paths.clone(), test_opts());
        e.activate(Kind::Server, "2.0.0").unwrap();
        let (v, bytes) = active(&self.paths, NAME);
        assert_eq!(v, "2.0.0");
        assert_eq!(
            bytes, self.new,
            "the active binary is the full target's bytes"
        );
        assert!(no_part(&self.paths, NAME, "2.0.0"));
        assert!(
            !self
                .paths
                .cache_dir()
                .join("svc-server-2.0.0.delta.part")
                .exists(),
            "the applied delta's file is removed"
        );
    }
}

#[test]
fn a_delta_from_the_running_binary_is_applied_and_the_full_artifact_never_fetched() {
    let f = setup("applied");
    let d = f.serve_delta(
        svc::update::delta::make(&f.old, &f.new, V1).unwrap(),
        &f.old,
    );
    assert!(
        d.size * 10 < f.new.len() as u64,
        "delta {} of {}",
        d.size,
        f.new.len()
    );
    let staged = f.stage(&[d], DeltaFallback::Never).unwrap();
    assert_eq!(
        staged,
        Staging::Ready {
            version: "2.0.0".into()
        }
    );
    assert_eq!(f.requests("/delta"), 1);
    assert_eq!(f.requests("/full"), 0, "no byte of the full artifact");
    assert_eq!(f.noted().0, "applied");
    f.activate_and_check();
}

#[test]
fn a_delta_from_another_binary_is_not_downloaded() {
    let f = setup("other-from");
    let other = fake_binary(NAME, "0.9.0", "ok", 1000);
    let d = f.serve_delta(
        svc::update::delta::make(&other, &f.new, V1).unwrap(),
        &other,
    );
    // The rule forbids the full download: nothing at all is fetched.
    let e = f
        .stage(std::slice::from_ref(&d), DeltaFallback::Never)
        .unwrap_err();
    assert!(
        matches!(
            miss_of(&e),
            Miss::Unusable(DeltaError::NoneFromRunning { offered: 1, .. })
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("none of the 1 deltas offered is from the running"),
        "{e}"
    );
    assert_eq!((f.requests("/delta"), f.requests("/full")), (0, 0));
    assert_untouched(&f.paths, NAME, "1.0.0", &f.old, "2.0.0");
    let (outcome, why) = f.noted();
    assert_eq!(outcome, "refused");
    assert!(why.contains(&sha256_hex(&f.old)), "{why}");
    // Allowed: the full artifact, and the status says why.
    f.stage(&[d], DeltaFallback::Full).unwrap();
    assert_eq!((f.requests("/delta"), f.requests("/full")), (0, 1));
    let (outcome, why) = f.noted();
    assert_eq!(outcome, "full-download");
    assert!(why.contains("none of the 1 deltas"), "{why}");
    f.activate_and_check();
}

/// What happened to the deltas when the rule `never` refused the offer: the typed error.
fn miss_of(e: &UpdateError) -> &Miss {
    match e {
        UpdateError::Delta(DeltaError::NoFallback { miss }) => miss,
        other => panic!("not the rule's refusal of a missed delta: {other:?}"),
    }
}

/// Each bad delta: refused under `never` (nothing installed, no full download), the full
/// artifact under `full`. `is` tells the error's variant; `why` is in its text.
fn refused_then_full(
    test: &str,
    bad: impl Fn(&Fixture) -> Delta,
    is: fn(&Miss) -> bool,
    why: &str,
) {
    let f = setup(test);
    let d = bad(&f);
    let e = f
        .stage(std::slice::from_ref(&d), DeltaFallback::Never)
        .unwrap_err();
    assert!(e.is_refusal(), "{test}: {e}");
    assert!(is(miss_of(&e)), "{test}: {e:?}");
    assert!(e.to_string().contains(why), "{test}: {e}");
    assert_eq!(f.requests("/full"), 0, "{test}: the rule is never");
    if test == "huge" {
        assert_eq!(f.requests("/delta"), 0, "refused before a byte of it");
    }
    assert_untouched(&f.paths, NAME, "1.0.0", &f.old, "2.0.0");
    assert!(
        no_part(&f.paths, NAME, "2.0.0"),
        "{test}: no half-made result left"
    );
    assert_eq!(f.noted().0, "refused");
    f.stage(&[d], DeltaFallback::Full).unwrap();
    assert_eq!(f.requests("/full"), 1, "{test}");
    let (outcome, reason) = f.noted();
    assert_eq!(outcome, "full-download");
    assert!(reason.contains(why), "{test}: {reason}");
    f.activate_and_check();
}

#[test]
fn a_corrupted_delta_is_refused() {
    refused_then_full(
        "corrupted",
        |f| {
            let mut d = svc::update::delta::make(&f.old, &f.new, V1).unwrap();
            let n = d.len();
            for b in &mut d[20..n - 8] {
                *b ^= 0x5a;
            }
            f.serve_delta(d, &f.old)
        },
        // Flipped bits: the stream refused, or a result of other bytes.
        |m| {
            matches!(
                m,
                Miss::Failed(UpdateError::Delta(_) | UpdateError::ShaMismatch { .. })
            )
        },
        "delta",
    );
}

#[test]
fn a_delta_that_makes_other_bytes_is_refused() {
    refused_then_full(
        "wrong-result",
        |f| {
            // A well-formed delta from the running binary to the wrong file of the right size.
            let mut wrong = f.new.clone();
            let n = wrong.len();
            wrong[n - 1] ^= 1;
            f.serve_delta(
                svc::update::delta::make(&f.old, &wrong, V1).unwrap(),
                &f.old,
            )
        },
        |m| matches!(m, Miss::Failed(UpdateError::ShaMismatch { .. })),
        "sha256 mismatch",
    );
}

#[test]
fn a_truncated_delta_is_refused() {
    refused_then_full(
        "truncated",
        |f| {
            let d = svc::update::delta::make(&f.old, &f.new, V1).unwrap();
            f.serve_delta(d[..d.len() / 2].to_vec(), &f.old)
        },
        |m| {
            matches!(
                m,
                Miss::Failed(UpdateError::Delta(
                    DeltaError::StreamEndsEarly | DeltaError::EndsInRecord
                ))
            )
        },
        "truncated",
    );
}

#[test]
fn a_huge_delta_is_refused_before_a_byte_of_it() {
    refused_then_full(
        "huge",
        |f| {
            let d = f.serve_delta(vec![0u8; 64], &f.old);
            Delta {
                size: f.new.len() as u64 + 1,
                ..d
            }
        },
        |m| {
            matches!(
                m,
                Miss::Failed(UpdateError::Delta(DeltaError::NotSmaller { .. }))
            )
        },
        "not less than the full artifact",
    );
}

#[test]
fn a_delta_whose_bytes_are_not_the_announced_ones_is_refused() {
    refused_then_full(
        "bad-hash",
        |f| {
            let good = svc::update::delta::make(&f.old, &f.new, V1).unwrap();
            let d = f.serve_delta(good, &f.old);
            Delta {
                sha256: "0".repeat(64),
                ..d
            }
        },
        |m| matches!(m, Miss::Failed(UpdateError::ShaMismatch { .. })),
        "sha256 mismatch",
    );
}

#[test]
fn a_v2_delta_is_applied_as_v1_ones_are() {
    let f = setup("v2-applied");
    let d = f.serve_at(
        "/delta",
        svc::update::delta::make(&f.old, &f.new, V2).unwrap(),
        &f.old,
        Some("svc-delta-v2"),
    );
    f.stage(&[d], DeltaFallback::Never).unwrap();
    assert_eq!((f.requests("/delta"), f.requests("/full")), (1, 0));
    assert_eq!(f.noted().0, "applied");
    f.activate_and_check();
}

#[test]
fn of_the_deltas_from_the_running_binary_the_smallest_readable_one_alone_is_fetched() {
    let f = setup("smallest");
    let v1 = svc::update::delta::make(&f.old, &f.new, V1).unwrap();
    // The v2 delta made the larger by junk after its stream (refused if it were taken):
    // the agent takes the smaller, v1, and fetches neither the other nor the unknown one.
    let mut v2 = svc::update::delta::make(&f.old, &f.new, V2).unwrap();
    v2.resize(v1.len() + 1000, 0);
    let unknown = f.serve_at("/v9", vec![1; 10], &f.old, Some("svc-delta-v9"));
    let big = f.serve_at("/v2", v2, &f.old, Some("svc-delta-v2"));
    let small = f.serve_at("/delta", v1, &f.old, None);
    f.stage(&[unknown, big, small], DeltaFallback::Never)
        .unwrap();
    assert_eq!(
        (f.requests("/v9"), f.requests("/v2"), f.requests("/delta")),
        (0, 0, 1),
        "the smallest of the formats this agent reads, nothing else"
    );
    assert_eq!(f.requests("/full"), 0);
    f.activate_and_check();
}

#[test]
fn a_delta_in_a_format_this_agent_does_not_read_is_not_downloaded() {
    let f = setup("unknown-format");
    let d = f.serve_at(
        "/delta",
        svc::update::delta::make(&f.old, &f.new, V1).unwrap(),
        &f.old,
        Some("svc-delta-v9"),
    );
    let e = f
        .stage(std::slice::from_ref(&d), DeltaFallback::Never)
        .unwrap_err();
    assert!(
        matches!(
            miss_of(&e),
            Miss::Unusable(DeltaError::UnknownFormats { formats, .. }) if formats == &["svc-delta-v9"]
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("formats this agent does not read: svc-delta-v9"),
        "{e}"
    );
    assert_eq!((f.requests("/delta"), f.requests("/full")), (0, 0));
    assert_untouched(&f.paths, NAME, "1.0.0", &f.old, "2.0.0");
    f.stage(&[d], DeltaFallback::Full).unwrap();
    assert_eq!((f.requests("/delta"), f.requests("/full")), (0, 1));
    let (outcome, why) = f.noted();
    assert_eq!(outcome, "full-download");
    assert!(why.contains("svc-delta-v9"), "{why}");
    f.activate_and_check();
}

/// What an agent that does not know a format does with its bytes when the offer does not
/// say (agents before v2 see an `SVCDLT02` delta this way): refused by its magic, and the
/// full artifact only by the vendor's rule.
#[test]
fn a_delta_of_a_format_the_agent_does_not_know_is_refused_by_its_magic() {
    refused_then_full(
        "unknown-magic",
        |f| {
            let mut d = svc::update::delta::make(&f.old, &f.new, V1).unwrap();
            d[..8].copy_from_slice(b"SVCDLT03");
            f.serve_delta(d, &f.old)
        },
        |m| {
            matches!(
                m,
                Miss::Failed(UpdateError::Delta(DeltaError::NotThisFormat))
            )
        },
        "not an svc-delta-v1 or -v2 file",
    );
}

#[test]
fn a_corrupted_v2_delta_is_refused() {
    refused_then_full(
        "v2-corrupted",
        |f| {
            let mut d = svc::update::delta::make(&f.old, &f.new, V2).unwrap();
            let n = d.len();
            for b in &mut d[21..n - 8] {
                *b ^= 0x5a;
            }
            f.serve_at("/delta", d, &f.old, Some("svc-delta-v2"))
        },
        |m| {
            matches!(
                m,
                Miss::Failed(UpdateError::Delta(_) | UpdateError::ShaMismatch { .. })
            )
        },
        "delta",
    );
}

#[test]
fn a_truncated_v2_delta_is_refused() {
    refused_then_full(
        "v2-truncated",
        |f| {
            let d = svc::update::delta::make(&f.old, &f.new, V2).unwrap();
            f.serve_at(
                "/delta",
                d[..d.len() / 2].to_vec(),
                &f.old,
                Some("svc-delta-v2"),
            )
        },
        |m| {
            matches!(
                m,
                Miss::Failed(UpdateError::Delta(
                    DeltaError::StreamEndsEarly | DeltaError::EndsInRecord
                ))
            )
        },
        "truncated",
    );
}

/// The attack on the device's memory: an LZMA header (the sender's) asking for a 4 GiB
/// dictionary for a patch it says is 1 TiB. Refused from the header, the full artifact only
/// by the vendor's rule.
#[test]
fn a_v2_delta_asking_for_a_huge_dictionary_is_refused() {
    refused_then_full(
        "v2-dict",
        |f| {
            let mut d = svc::update::delta::make(&f.old, &f.new, V2).unwrap();
            d[17..21].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
            d[21..29].copy_from_slice(&(1u64 << 40).to_le_bytes());
            f.serve_at("/delta", d, &f.old, Some("svc-delta-v2"))
        },
        |m| {
            matches!(
                m,
                Miss::Failed(UpdateError::Delta(DeltaError::DictionaryTooLarge {
                    asked: 0xffff_fff0
                }))
            )
        },
        "dictionary of 4294967280 bytes",
    );
}

/// An old-format delta still applies when the offer names its format (`svc-delta-v1`).
#[test]
fn a_v1_delta_named_as_such_is_applied() {
    let f = setup("v1-named");
    let d = f.serve_at(
        "/delta",
        svc::update::delta::make(&f.old, &f.new, V1).unwrap(),
        &f.old,
        Some("svc-delta-v1"),
    );
    f.stage(&[d], DeltaFallback::Never).unwrap();
    assert_eq!((f.requests("/delta"), f.requests("/full")), (1, 0));
    f.activate_and_check();
}

/// How an agent reads an offer's delta: fields it does not know (a later one's) are
/// ignored, not a failure of the offer; an absent `format` is v1.
#[test]
fn an_offer_s_delta_with_fields_unknown_to_the_agent_is_read() {
    let d: Delta = serde_json::from_value(serde_json::json!({
        "from": "ab".repeat(32), "url": "artifacts/x", "size": 10, "sha256": "cd".repeat(32),
        "format": "svc-delta-v2", "filter_options": {"start": 0}
    }))
    .unwrap();
    assert_eq!(d.format.as_deref(), Some("svc-delta-v2"));
    let d: Delta = serde_json::from_value(serde_json::json!({
        "from": "ab".repeat(32), "url": "artifacts/x", "size": 10, "sha256": "cd".repeat(32)
    }))
    .unwrap();
    assert_eq!(d.format, None);
}

/// The attack on memory itself: the same 4 GiB dictionary given to `svc-agent apply-delta`
/// under a 512 MiB address-space limit: refused from its header, by the cap, with a clear
/// error. Without the cap the decoder took the header at its word (a 4 GiB allocation that
/// every decoded byte then fills; a stream of empty bsdiff records fills all of it) and this
/// delta failed only at its end, as "truncated".
#[test]
fn apply_delta_refuses_a_huge_dictionary_before_allocating_it() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("delta-v2-dict-cli");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let old: Vec<u8> = (0..100_000u32)
        .flat_map(|i| (i * 7).to_le_bytes())
        .collect();
    let mut d = svc::update::delta::make(&old, &old, V2).unwrap();
    d[17..21].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    d[21..29].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let (o, p, out) = (dir.join("old"), dir.join("delta"), dir.join("out"));
    std::fs::write(&o, &old).unwrap();
    std::fs::write(&p, &d).unwrap();
    let r = std::process::Command::new("prlimit")
        .arg("--as=536870912")
        .arg(env!("CARGO_BIN_EXE_svc-agent"))
        .arg("apply-delta")
        .args([&o, &p, &out])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "refused, not killed: {err}");
    assert!(err.contains("dictionary of 4294967280 bytes"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_v2_delta_that_makes_other_bytes_is_refused() {
    refused_then_full(
        "v2-other-bytes",
        |f| {
            let mut wrong = f.new.clone();
            let n = wrong.len();
            wrong[n - 1] ^= 1;
            let d = svc::update::delta::make(&f.old, &wrong, V2).unwrap();
            f.serve_at("/delta", d, &f.old, Some("svc-delta-v2"))
        },
        |m| matches!(m, Miss::Failed(UpdateError::ShaMismatch { .. })),
        "sha256 mismatch",
    );
}

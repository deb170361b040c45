// Records the target triple and the release version for `svc-agent version --json`.
fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=SVC_TARGET={target}");
    // Release pipelines (and the update tests) may stamp another version into a build.
    let version = std::env::var("SVC_BUILD_VERSION")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| std::env::var("CARGO_PKG_VERSION").unwrap_or_default());
    println!("cargo:rustc-env=SVC_VERSION={version}");
    println!("cargo:rerun-if-env-changed=SVC_BUILD_VERSION");
    // Only the lab's boot-guard scenario builds an agent whose `run` fails on purpose.
    println!("cargo:rerun-if-env-changed=SVC_LAB_BROKEN_RUN");
    // The build date lets the agent tell "clock not set" from "certificate expired".
    let epoch = std::env::var("SOURCE_DATE_EPOCH").ok().unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs().to_string())
            .unwrap_or_else(|_| "0".into())
    });
    println!("cargo:rustc-env=SVC_BUILD_EPOCH={epoch}");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    // Where the agent keeps its writable state and its credentials (docs/packaging.md
    // "Read-only root file systems"): chosen at image build time (the Yocto layer's
    // SVC_STATE_DIR, the Buildroot package's Kconfig option), overridable at run time by the
    // environment variables of the same names. shared/conventions.md's paths by default.
    let mut chosen = Vec::new();
    for (var, default) in [
        ("SVC_STATE_DIR", "/opt/svc"),
        ("SVC_CREDENTIALS_DIR", "/etc"),
    ] {
        println!("cargo:rerun-if-env-changed={var}");
        let value = std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.into());
        if let Err(why) = check_device_path(&value) {
            panic!("{var}={value:?}: {why}");
        }
        println!("cargo:rustc-env=SVC_BUILT_{}={value}", &var[4..]);
        chosen.push(std::path::PathBuf::from(value));
    }
    if chosen[1].starts_with(&chosen[0]) {
        panic!("SVC_CREDENTIALS_DIR may not be inside SVC_STATE_DIR (uninstall removes the state directory)");
    }
    fast_start_layout();
    println!("cargo:rerun-if-changed=build.rs");
}

/// Fast start (BENCHMARKS.md, "Fast start, sixth pass"): the functions svc-agent runs up to
/// svc-server's spawn, placed together by build/fast-start.ld (scripts/fast-start-order.py),
/// fault in as a few 64 KiB blocks instead of ~17 more. Only for the static musl builds that
/// ship (their linkers, GNU ld and lld, take the script's INSERT as an addition to their
/// own); layout only, every other build keeps the linker's default.
fn fast_start_layout() {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    // Rust's own musl targets (static by default); not a distribution's (Yocto's "poky").
    if var("CARGO_CFG_TARGET_ENV") != "musl" || var("CARGO_CFG_TARGET_VENDOR") != "unknown" {
        return;
    }
    let script = std::path::Path::new(&var("CARGO_MANIFEST_DIR")).join("build/fast-start.ld");
    println!("cargo:rustc-link-arg-bin=svc-agent=-T");
    println!("cargo:rustc-link-arg-bin=svc-agent={}", script.display());
    println!("cargo:rerun-if-changed=build/fast-start.ld");
}

/// The same rule as `paths::check_device_path` (build scripts cannot use the crate).
fn check_device_path(p: &str) -> Result<(), &'static str> {
    if !p.starts_with('/') || p.trim_end_matches('/').is_empty() {
        return Err("must be an absolute path other than /");
    }
    if p.split('/').any(|c| c == "." || c == "..")
        || p.chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '%')
    {
        return Err("must not hold . or .. components, white space, % or control characters");
    }
    Ok(())
}

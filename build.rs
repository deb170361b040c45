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
    println!("cargo:rerun-if-changed=build.rs");
}

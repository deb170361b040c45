//! A local fault while the engine takes an SWUpdate image apart (a full cache file system) is
//! the device's, not the image's: not a refusal, which would fail a hawkBit action for good
//! and never fetch the image again, but an error the next poll retries (#41).
use crate::hawkbit::swu_image;
use crate::update_support::{sandbox, sha256_hex, test_opts, SmallFs};
use svc::update::swu::SwuOffer;
use svc::update::{Engine, UpdateError};

/// The offer of version 2.0.0 of the image `bytes` written at `src`.
fn file_offer(src: &std::path::Path, bytes: &[u8]) -> SwuOffer {
    SwuOffer {
        url: format!("file://{}", src.display()),
        version: "2.0.0".into(),
        size: bytes.len() as u64,
        sha256: Some(sha256_hex(bytes)),
        sha1: None,
        identity: None,
    }
}

#[test]
fn a_full_cache_while_an_image_is_taken_apart_is_not_a_refusal() {
    let paths = sandbox("swu-cache-full");
    // Room for the archive's download (3 MiB and the 1 MiB margin), not for its file too.
    let small = SmallFs::mount(&paths.state_dir(), "5m");
    let body = vec![7u8; 3 << 20];
    let image = swu_image(&[("svc-server", "2.0.0", &body)], &[&body], None, None);
    let src = paths.root().join("image.swu");
    std::fs::write(&src, &image).unwrap();
    let offer = file_offer(&src, &image);
    let engine = Engine::new(paths.clone(), test_opts());
    let e = engine.unpack_swu(&offer).unwrap_err();
    assert!(
        !e.is_refusal(),
        "a full cache is the device's fault, not the image's, yet the image was refused: {e}"
    );
    assert!(matches!(e, UpdateError::Io { .. }), "{e:?}");
    assert!(e.to_string().contains("svc-server"), "names the file: {e}");
    // With room again the same offer is taken apart: nothing of the image was held against it.
    drop(small);
    let files = engine.unpack_swu(&offer).unwrap();
    assert_eq!(std::fs::read(&files[0].path).unwrap(), body);
}

/// The manifest of `cache/swu/` vouches for the files taken out of the last image (it is
/// written last), so clearing the folder for another image removes it first: a cut part-way
/// through the clearing left a manifest naming files already gone (campaign seed 41, cut 248,
/// hawkbit-swu/swu-unpack). The clearing is stopped part-way here by the files folder being a
/// mount point, which can be emptied but not removed.
#[test]
fn clearing_the_image_folder_part_way_leaves_no_manifest_naming_missing_files() {
    let paths = sandbox("swu-clear-part-way");
    let root = paths.cache_dir().join("swu");
    let files = root.join("files");
    let _busy = SmallFs::mount(&files, "1m");
    let old = files.join("svc-server");
    std::fs::write(&old, b"old").unwrap();
    let manifest = root.join("manifest.json");
    let m = serde_json::json!({
        "key": "an earlier image",
        "files": [["svc-server", "1.0.0", sha256_hex(b"old"), 3, null, old.display().to_string()]],
    });
    std::fs::write(&manifest, m.to_string()).unwrap();
    let image = swu_image(&[("svc-server", "2.0.0", b"new")], &[b"new"], None, None);
    let src = paths.root().join("image.swu");
    std::fs::write(&src, &image).unwrap();
    let offer = file_offer(&src, &image);
    let e = Engine::new(paths.clone(), test_opts())
        .unpack_swu(&offer)
        .unwrap_err();
    assert!(!e.is_refusal(), "{e}");
    assert!(
        !manifest.exists() || old.exists(),
        "the clearing stopped part-way ({e}) with the manifest naming {} gone",
        old.display()
    );
}

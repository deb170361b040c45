//! The credentials file (`/etc/svc.json`, or pasted in the portal): any bytes give
//! credentials or an error, never a panic; accepted credentials round-trip through their JSON
//! form, and neither `Debug` nor an error ever carries the secret.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::credentials::{ApiKey, Credentials, Secret};

fuzz_target!(|data: &[u8]| {
    match Credentials::parse(data) {
        Ok(c) => {
            let text = serde_json::to_vec(&c.to_json()).expect("serializable");
            let again = Credentials::parse(&text).expect("its own JSON form is accepted");
            assert_eq!(again, c);
            // Debug does not depend on the secret's value at all.
            let mut other = c.clone();
            other.secret = match &c.secret {
                Secret::PartSecret(_) => Secret::PartSecret("x".into()),
                Secret::ApiKey(k) => Secret::ApiKey(ApiKey {
                    id: k.id.clone(),
                    key: "x".into(),
                }),
            };
            assert_eq!(format!("{c:?}"), format!("{other:?}"));
        }
        Err(e) => {
            // serde's syntax errors name positions only; hand-made shape errors name keys.
            assert!(!e.to_string().is_empty());
        }
    }
});

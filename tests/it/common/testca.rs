//! The test process's one CA, made at test time, and a rustls server config for loopback
//! HTTPS. Clients trust the CA through `SSL_CERT_FILE`: [`test_ca`] points this process's
//! at it (minreq reads the store once per process, so before the first request), and tests
//! pass `ca_file` to the processes they start.
#![allow(dead_code)]
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

pub struct TestCa {
    /// PEM file of the CA (what `SSL_CERT_FILE` points at).
    pub ca_file: PathBuf,
    /// The server certificate (with the CA) and its key as PEM files, for nginx.
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    chain: Vec<CertificateDer<'static>>,
    key_der: Vec<u8>,
}

/// The process-wide test CA; sets `SSL_CERT_FILE` on first use.
pub fn test_ca() -> &'static TestCa {
    static CA: OnceLock<TestCa> = OnceLock::new();
    CA.get_or_init(|| {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose,
        };
        let ca_key = KeyPair::generate().expect("ca key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "svc-agent test CA");
        let ca_cert = ca_params.self_signed(&ca_key).expect("ca cert");
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().expect("leaf key");
        let mut leaf =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
                .expect("leaf params");
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf.distinguished_name
            .push(DnType::CommonName, "localhost");
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).expect("leaf cert");

        let dir = std::env::temp_dir().join(format!("svc-test-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("ca dir");
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca_cert.pem()).expect("write ca");
        let cert_file = dir.join("server.pem");
        let key_file = dir.join("server.key");
        std::fs::write(&cert_file, leaf_cert.pem() + &ca_cert.pem()).expect("write cert");
        std::fs::write(&key_file, leaf_key.serialize_pem()).expect("write key");
        // Before any request of this process: minreq reads the store once.
        std::env::set_var("SSL_CERT_FILE", &ca_file);
        TestCa {
            ca_file,
            cert_file,
            key_file,
            chain: vec![leaf_cert.der().clone(), ca_cert.der().clone()],
            key_der: leaf_key.serialize_der(),
        }
    })
}

impl TestCa {
    /// A server config with the `localhost` / 127.0.0.1 certificate.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("tls versions")
            .with_no_client_auth()
            .with_single_cert(
                self.chain.clone(),
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
            )
            .expect("server cert");
        Arc::new(config)
    }
}

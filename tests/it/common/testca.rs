//! A test CA made at test time and a rustls server config for loopback HTTPS. Clients trust
//! the CA through `SSL_CERT_FILE` (the agent's minreq uses the system store).
#![allow(dead_code)]
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct TestCa {
    pub ca_pem_path: PathBuf,
    /// The server's certificate and key as PEM files, for nginx.
    pub cert_pem_path: PathBuf,
    pub key_pem_path: PathBuf,
    pub server_config: Arc<rustls::ServerConfig>,
}

impl TestCa {
    /// A CA and a certificate for `localhost` and 127.0.0.1, written under `dir`.
    pub fn new(dir: &Path) -> TestCa {
        std::fs::create_dir_all(dir).unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "svc test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
                .unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        let ca_pem_path = dir.join("ca.pem");
        std::fs::write(&ca_pem_path, ca_cert.pem()).unwrap();
        let cert_pem_path = dir.join("server.pem");
        let key_pem_path = dir.join("server.key");
        std::fs::write(&cert_pem_path, cert.pem()).unwrap();
        std::fs::write(&key_pem_path, key.serialize_pem()).unwrap();
        let chain = vec![CertificateDer::from(cert.der().to_vec())];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let server_config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        TestCa {
            ca_pem_path,
            cert_pem_path,
            key_pem_path,
            server_config: Arc::new(server_config),
        }
    }
}

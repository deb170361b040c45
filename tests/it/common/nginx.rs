//! Debian's nginx in front of a test server: TLS terminated with the test CA's certificate,
//! HTTP/1.1 keep-alive to clients, proxying over plain HTTP on loopback; defaults
//! otherwise, but for `proxy_read_timeout` (held polls). A child of the test (no daemon, no master: one process), on an ephemeral
//! port of 127.0.0.1, with its own prefix; killed on drop. scripts/test-cargo.sh installs
//! the package; under CI=true a missing nginx fails the tests that need it.
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Nginx {
    pub url: String,
    child: Child,
    prefix: PathBuf,
}

/// The nginx binary. The tests that use it are `#[ignore = "needs nginx ..."]`: run, they
/// fail without it (scripts/test-cargo.sh installs it and runs them).
pub fn binary() -> PathBuf {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("nginx is not installed (apt-get install nginx; scripts/test-cargo.sh does)")
}

fn config(prefix: &Path, cert: &Path, key: &Path, port: u16, backend: u16) -> String {
    let p = prefix.display();
    format!(
        r#"daemon off;
master_process off;
pid {p}/nginx.pid;
error_log {p}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {p}/access.log;
    client_body_temp_path {p}/body;
    proxy_temp_path {p}/proxy;
    fastcgi_temp_path {p}/fastcgi;
    uwsgi_temp_path {p}/uwsgi;
    scgi_temp_path {p}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        server_name localhost;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{
            proxy_pass http://127.0.0.1:{backend};
            # Held polls (the long poll, docs/protocol.md): longer than the agent's hold
            # plus its 30 s deadline, or nginx answers 504 after its default 60 s.
            proxy_read_timeout 1900s;
        }}
    }}
}}
"#,
        cert = cert.display(),
        key = key.display(),
    )
}

impl Nginx {
    /// Starts nginx proxying to `backend` (plain HTTP on 127.0.0.1), serving `cert` and
    /// `key` (PEM). Panics when it cannot start or is not installed.
    pub fn start(prefix: &Path, cert: &Path, key: &Path, backend: u16) -> Nginx {
        let bin = binary();
        std::fs::create_dir_all(prefix).unwrap();
        // nginx cannot report an ephemeral port: take one from the kernel, free it and
        // retry on the rare race with another process.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let conf = prefix.join("nginx.conf");
            std::fs::write(&conf, config(prefix, cert, key, port, backend)).unwrap();
            let mut child = Command::new(&bin)
                .arg("-p")
                .arg(prefix)
                .arg("-c")
                .arg(&conf)
                .arg("-e")
                .arg(prefix.join("error.log"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let end = Instant::now() + Duration::from_secs(20);
            while Instant::now() < end {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                // Ours, not another test's nginx that took the port first.
                if super::listen::listens_on(child.id(), port)
                    && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                {
                    return Nginx {
                        url: format!("https://localhost:{port}"),
                        child,
                        prefix: prefix.to_path_buf(),
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(prefix.join("error.log")).unwrap_or_default();
            assert!(
                log.contains("Address already in use"),
                "nginx did not start:\n{log}"
            );
        }
        panic!("nginx found no free port");
    }

    /// nginx's error log (upstream failures are reported there).
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

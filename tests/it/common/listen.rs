//! Whether a server the test started is the one listening on its port. A port found free may
//! be taken by another test's server before ours binds it; ours then exits, but the other one
//! answers there, and a test that only connected would go on talking to the wrong server
//! (gooseBit: another test's devices and images, its signatures by another key).

/// True when process `pid` holds a TCP socket listening on 127.0.0.1:`port`.
pub fn listens_on(pid: u32, port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return false;
    };
    // /proc/net/tcp: "sl local rem st ... inode"; 127.0.0.1 in the kernel's byte order, the
    // port in hex, 0A = LISTEN.
    let local = format!("0100007F:{port:04X}");
    let sockets: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 9 && f[1] == local && f[3] == "0A").then(|| format!("socket:[{}]", f[9]))
        })
        .collect();
    if sockets.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|t| sockets.iter().any(|s| t.as_os_str() == s.as_str()))
    })
}

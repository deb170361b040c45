//! The library's only unsafe code: thin, safe wrappers over the few libc calls that std
//! does not offer. Every other module is compiled with `unsafe_code` denied (Cargo.toml
//! `[lints]`), so an unsafe block anywhere else does not build; the one other place that
//! allows it is svc-agent's C `main` (src/bin/svc-agent.rs).
#![allow(unsafe_code)]

use std::net::Ipv4Addr;
use std::os::unix::io::RawFd;
use std::path::Path;
use std::time::Duration;

/// Sends `sig` to `pid` (a negative pid names a process group; signal 0 only checks that
/// the target exists). True when the kernel accepted it.
pub fn kill(pid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) takes two integers and touches no memory of ours.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// The part of std's runtime start that svc-agent's C `main` (src/bin/svc-agent.rs) keeps:
/// descriptors 0-2 open (on /dev/null when closed), so no file the agent opens takes one of
/// them and receives its log lines, and SIGPIPE ignored, so a write to a closed pipe or
/// socket fails with EPIPE instead of ending the agent. Two system calls when 0-2 are open.
pub fn process_start() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: three valid pollfds that live for the duration of the call; no wait.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } > 0 {
        for p in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0) {
            // SAFETY: a NUL-terminated path; the descriptor is left open on purpose (it
            // takes the lowest free number, the closed one).
            let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
            if fd != p.fd {
                // Neither /dev/null nor the expected number: no safe way on; as std does.
                std::process::abort();
            }
        }
    }
    // SAFETY: SIG_IGN is a valid disposition for SIGPIPE; no memory is passed.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// The stack each thread of the agent and svc-server reserves unless it asks for less: just
/// under a 2 MiB huge page. std's default is 2 MiB, and musl's thread block on top makes the
/// mapping 2 MiB + 4 KiB; placed right under the static-pie image (2 MiB aligned), its top
/// is aligned, and with transparent huge pages `always` (Debian's default) the first touch
/// of the stack faults in the whole aligned 2 MiB as one page: the lab's idle agent held
/// 2,048 KiB for its watchdog thread's few KiB. The kernel maps a huge page only where the
/// aligned 2 MiB lies wholly inside the mapping (`transhuge_vma_suitable`, huge_mm.h),
/// which a mapping under 2 MiB never holds. Reserved, not resident: only touched pages are.
const THREAD_STACK: usize = 2 * 1024 * 1024 - 64 * 1024;

/// A named thread with [`THREAD_STACK`] (a smaller `stack_size` after it still applies):
/// every thread the agent or svc-server starts is built here, never with std's default.
pub(crate) fn thread(name: impl Into<String>) -> std::thread::Builder {
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(THREAD_STACK)
}

/// The arguments of a C `main` as Strings (invalid UTF-8 replaced, not refused: the command
/// line then reports an unknown word instead of a panic).
///
/// # Safety
/// `argv` must point to `argc` pointers to NUL-terminated strings, alive for the call.
pub unsafe fn c_args(argc: libc::c_int, argv: *const *const libc::c_char) -> Vec<String> {
    (0..usize::try_from(argc).unwrap_or(0))
        // SAFETY: the caller's contract: each of the first `argc` pointers is a C string.
        .map(|i| unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) })
        .map(|s| s.to_string_lossy().into_owned())
        .collect()
}

/// flock(2) on a descriptor the caller owns; EINTR is retried.
pub(crate) fn flock(fd: RawFd, op: libc::c_int) -> std::io::Result<()> {
    loop {
        // SAFETY: flock(2) takes a descriptor and a flag word; no memory is passed.
        if unsafe { libc::flock(fd, op) } == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// A path component as a C string; a NUL byte in it is an invalid name.
/// A call's 0-or-errno result as a `Result`.
fn zero_ok(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn c_name(name: &std::ffi::OsStr) -> std::io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(name.as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in a name"))
}

/// openat(2): `name` relative to the directory `dir` (`fsutil::Dir`, the one caller, always
/// adds O_CLOEXEC); EINTR is retried.
pub(crate) fn openat(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::OsStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let c = c_name(name)?;
    loop {
        // SAFETY: a valid descriptor borrowed for the call, a NUL-terminated name; the
        // mode is read only with O_CREAT, as open(2) says.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, mode as libc::c_uint) };
        if fd >= 0 {
            // SAFETY: a fresh descriptor that nothing else owns.
            return Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) });
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// mkdirat(2) relative to `dir`.
pub(crate) fn mkdirat(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::OsStr,
    mode: libc::mode_t,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let c = c_name(name)?;
    // SAFETY: a valid descriptor borrowed for the call and a NUL-terminated name.
    zero_ok(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode) })
}

/// renameat(2) within one directory `dir`.
pub(crate) fn renameat(
    dir: std::os::fd::BorrowedFd<'_>,
    from: &std::ffi::OsStr,
    to: &std::ffi::OsStr,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (f, t) = (c_name(from)?, c_name(to)?);
    let d = dir.as_raw_fd();
    // SAFETY: a valid descriptor borrowed for the call and two NUL-terminated names.
    zero_ok(unsafe { libc::renameat(d, f.as_ptr(), d, t.as_ptr()) })
}

/// linkat(2) within one directory `dir`: a second name `to` for `from` (a link `from` is
/// not followed); fails when `to` exists.
pub(crate) fn linkat(
    dir: std::os::fd::BorrowedFd<'_>,
    from: &std::ffi::OsStr,
    to: &std::ffi::OsStr,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (f, t) = (c_name(from)?, c_name(to)?);
    let d = dir.as_raw_fd();
    // SAFETY: a valid descriptor borrowed for the call and two NUL-terminated names.
    zero_ok(unsafe { libc::linkat(d, f.as_ptr(), d, t.as_ptr(), 0) })
}

/// unlinkat(2) of a non-directory `name` in `dir` (never follows it: a link goes, not its
/// target).
pub(crate) fn unlinkat(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::OsStr,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let c = c_name(name)?;
    // SAFETY: a valid descriptor borrowed for the call and a NUL-terminated name.
    zero_ok(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) })
}

/// Signals caught by [`catch_early`] and not yet taken, one bit per signal number.
static EARLY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn note_early(sig: libc::c_int) {
    // Async-signal-safe: one lock-free atomic operation, nothing else.
    if (1..64).contains(&sig) {
        EARLY.fetch_or(1 << sig, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Catches `sigs` (numbers below 64) with a handler that only notes their arrival, for
/// [`take_early`]: one `rt_sigaction` a signal. A later handler (signal-hook's) replaces it.
/// Nothing is blocked, so a child spawned meanwhile inherits no mask from it (std's spawn
/// passes the parent's mask on), and an exec resets a caught signal to its default action.
pub(crate) fn catch_early(sigs: &[libc::c_int]) -> std::io::Result<()> {
    for &sig in sigs {
        // SAFETY: an all-zero sigaction is a valid value of this plain C struct.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = note_early as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        // SAFETY: sigemptyset writes only into the mask of `sa`, alive for the call.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: `sa` is initialised and alive for the call; its handler is an
        // async-signal-safe `extern "C"` function that lives for the whole program; no old
        // action is asked for.
        if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Which of the signals in `mask` (bit `1 << signal`) [`catch_early`]'s handler noted;
/// those bits are cleared, any others kept for their own taker.
pub(crate) fn take_early(mask: u64) -> u64 {
    EARLY.fetch_and(!mask, std::sync::atomic::Ordering::Relaxed) & mask
}

/// Waits up to `timeout` for `fd` to become readable (or for a signal to interrupt).
pub(crate) fn poll_readable(fd: RawFd, timeout: Duration) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd that lives for the duration of the call.
    unsafe { libc::poll(&mut pfd, 1, ms) };
}

/// Waits up to `timeout` for `fd` to become readable; whether it is.
pub(crate) fn wait_readable(fd: RawFd, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd that lives for the duration of the call.
    let n = unsafe { libc::poll(&mut pfd, 1, ms) };
    n > 0 && pfd.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0
}

/// Whether the file system holding `path` is mounted read-only (statvfs `ST_RDONLY`). A
/// path that does not exist yet is judged by its nearest existing ancestor (where it would
/// be created).
pub(crate) fn on_read_only_mount(path: &Path) -> std::io::Result<bool> {
    let mut p = path;
    while !p.exists() {
        match p.parent() {
            Some(parent) => p = parent,
            None => break,
        }
    }
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs(3) reads the C string and writes only into `st`, both alive here.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_flag & libc::ST_RDONLY != 0)
}

/// Bytes available to unprivileged writers on the file system holding `dir` (statvfs).
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs(3) reads the C string and writes only into `st`, both alive here.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// The machine's local time as (weekday with 0 = Monday, minute of the day), in its own
/// timezone; `None` when the C library cannot tell.
pub(crate) fn local_weekday_minute() -> Option<(u8, u16)> {
    // SAFETY: time(2) with a null pointer only returns the time.
    let t = unsafe { libc::time(std::ptr::null_mut()) };
    // SAFETY: an all-zero tm is a valid value of this plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r reads `t` and writes only into `tm`, both alive for the call.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return None;
    }
    // tm_wday: 0 = Sunday.
    Some((
        ((tm.tm_wday + 6) % 7) as u8,
        (tm.tm_hour * 60 + tm.tm_min) as u16,
    ))
}

/// SO_BINDTODEVICE: the socket only sees traffic that arrives on interface `ifname` (Linux
/// otherwise accepts packets for a local address on every interface).
pub(crate) fn bind_to_device(fd: RawFd, ifname: &str) -> std::io::Result<()> {
    let name = std::ffi::CString::new(ifname)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let bytes = name.as_bytes_with_nul();
    // SAFETY: setsockopt(2) reads `bytes.len()` bytes from a buffer that lives for the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            bytes.as_ptr().cast(),
            bytes.len() as libc::socklen_t,
        )
    };
    zero_ok(rc)
}

/// The interface that holds the IPv4 address `addr`, with its netmask (getifaddrs(3)).
pub(crate) fn ipv4_interface(addr: Ipv4Addr) -> std::io::Result<Option<(String, Ipv4Addr)>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a pointer to a list it allocates; freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let v4 = |sa: *const libc::sockaddr| -> Option<Ipv4Addr> {
        // SAFETY: a non-null sockaddr from getifaddrs is valid while the list lives; its
        // family says whether it is a sockaddr_in.
        unsafe {
            if sa.is_null() || i32::from((*sa).sa_family) != libc::AF_INET {
                return None;
            }
            let sin = &*sa.cast::<libc::sockaddr_in>();
            Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
        }
    };
    let mut found = None;
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` is an entry of the list getifaddrs returned, not freed yet.
        let ifa = unsafe { &*cur };
        if v4(ifa.ifa_addr) == Some(addr) && !ifa.ifa_name.is_null() {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
            let mask = v4(ifa.ifa_netmask).unwrap_or(Ipv4Addr::BROADCAST);
            found = Some((name.to_string_lossy().into_owned(), mask));
            break;
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `list` came from getifaddrs and is freed once; no reference outlives it.
    unsafe { libc::freeifaddrs(list) };
    Ok(found)
}

/// This process's effective user id.
/// Sets an integer socket option; false when refused (a stale descriptor included).
pub(crate) fn set_sockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: i32,
) -> bool {
    let v: libc::c_int = value;
    // SAFETY: a pointer to a local c_int and its length; a wrong descriptor only fails.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Reads an integer socket option (-1 when refused).
#[cfg(test)]
pub(crate) fn sockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> i32 {
    let mut v: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: pointers to locals of the lengths given.
    unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    v
}

/// The peer port of a connected TCP (IPv4 or IPv6) socket; `None` for anything else.
pub(crate) fn tcp_peer_port(fd: RawFd) -> Option<u16> {
    if sockopt_type(fd) != Some(libc::SOCK_STREAM) {
        return None;
    }
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getpeername writes at most `len` bytes into the storage.
    let rc = unsafe {
        libc::getpeername(
            fd,
            (&mut addr as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    match libc::c_int::from(addr.ss_family) {
        // sin_port and sin6_port sit at the same offset, in network order.
        libc::AF_INET | libc::AF_INET6 => {
            // SAFETY: the family says the storage starts as a sockaddr_in does.
            let sin =
                unsafe { &*(&addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(u16::from_be(sin.sin_port))
        }
        _ => None,
    }
}

fn sockopt_type(fd: RawFd) -> Option<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: pointers to locals of the lengths given.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(v)
}

pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid takes nothing, touches no memory of ours and cannot fail.
    unsafe { libc::geteuid() }
}

// ---- the release stamp (issue 40) ----

/// Declares a binary's release stamp, placed in `update::verify::STAMP_SECTION`: `release_stamp!(STAMP,
/// "svc-agent")`. The binary must use the static (e.g. `std::hint::black_box(&STAMP)`), so
/// that no linker drops it. Its version and target are the build's, the same `env!` values
/// `version --json` prints.
#[macro_export]
macro_rules! release_stamp {
    ($static:ident, $name:literal) => {
        // `link_section` counts as unsafe code: two items placed in one section under
        // clashing assumptions could misbehave. Here the section holds one plain byte array
        // that nothing writes and nothing but the release tool reads (from the file).
        #[allow(unsafe_code)]
        #[used]
        #[link_section = ".svc_release"]
        static $static: [u8; {
            concat!(
                "svc-release-stamp/1 binary_name=",
                $name,
                " version=",
                env!("SVC_VERSION"),
                " target=",
                env!("SVC_TARGET"),
                "\n"
            )
            .len()
        }] = $crate::sys::stamp_array(concat!(
            "svc-release-stamp/1 binary_name=",
            $name,
            " version=",
            env!("SVC_VERSION"),
            " target=",
            env!("SVC_TARGET"),
            "\n"
        ));
    };
}

/// `s` as a fixed-size array (for [`crate::release_stamp!`]).
pub const fn stamp_array<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N && i < b.len() {
        out[i] = b[i];
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrappers_answer_like_the_calls() {
        assert!(kill(std::process::id() as i32, 0));
        assert!(!kill(i32::MAX, 0), "no such process");
        assert!(free_bytes(Path::new("/")).unwrap() > 0);
        assert!(free_bytes(Path::new("/nonexistent/svc")).is_err());
        let (lo, mask) = ipv4_interface(Ipv4Addr::LOCALHOST).unwrap().unwrap();
        assert_eq!((lo.as_str(), mask), ("lo", Ipv4Addr::new(255, 0, 0, 0)));
        assert_eq!(
            ipv4_interface(Ipv4Addr::new(203, 0, 113, 77)).unwrap(),
            None
        );
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        use std::os::unix::io::AsRawFd;
        assert!(bind_to_device(l.as_raw_fd(), "lo").is_ok());
        assert!(bind_to_device(l.as_raw_fd(), "no-such-if0").is_err());
        let (day, minute) = local_weekday_minute().unwrap();
        // SIGWINCH: harmless to this test process whatever handles it. Raised on this
        // thread, so its handler has run when `raise` returns (a `kill` of the process may
        // be taken by another test's thread, later); its bit alone is taken.
        catch_early(&[libc::SIGWINCH]).unwrap();
        // SAFETY: raise has no memory preconditions; SIGWINCH's handler is `note_early`.
        assert_eq!(unsafe { libc::raise(libc::SIGWINCH) }, 0);
        assert_eq!(take_early(1 << libc::SIGWINCH), 1 << libc::SIGWINCH);
        assert_eq!(take_early(1 << libc::SIGWINCH), 0, "taken once");
        assert!(day < 7 && minute < 24 * 60);
    }
}

//! Issue 40, finding 4 and the note on plain polls: systemd's watchdog against a large `.swu`
//! from a slow hawkBit server, slow DDI answers and a slow management app. The real daemon
//! (`svc-agent run`) with systemd's notify socket simulated (`NOTIFY_SOCKET`,
//! `WATCHDOG_USEC`): `WATCHDOG=1` keeps coming while a download is slow but progressing and
//! while answers are slow; a kill mid-download is followed by a restart that resumes with
//! `Range` and installs. Then the resume's edges against the backend itself: a server that
//! ignores `Range`, a partial file larger than the image, and one whose bytes are not the
//! image's. And the other side: a loop that hangs outside any bounded wait stops the pings.
use crate::common::https::{app_sandbox, Behavior, Front, POLL};
use crate::common::sandbox::*;
use crate::ddi_server::{DdiServer, CONTROLLER, TENANT, TOKEN};
use crate::hawkbit::swu_image;
use crate::hawkbit_daemon::machine;
use crate::update_support::*;
use serde_json::json;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use svc::hawkbit::HawkbitTransport;
use svc::paths::Paths;
use svc::protocol::{PollOutcome, ProtocolError, Transport};
use svc::update::DownloadOptions;

const NAME: &str = "svc-server";
/// systemd's watchdog interval given to the agent: 2 s, so it pings every 0.5 s.
const WATCHDOG_USEC: &str = "2000000";
/// How long a test waits for one ping: many feed periods, for a busy machine.
const PING_WAIT: Duration = Duration::from_secs(20);

/// systemd's notify socket, simulated: counts `WATCHDOG=1` and sees `READY=1`.
struct NotifySocket {
    path: PathBuf,
    pings: Arc<AtomicUsize>,
    ready: Arc<AtomicBool>,
    /// The feeder's ticks without a ping (`STATUS=stalled...`), and the pings that came
    /// while the last status said stalled: one sender, one socket, so in order.
    stalled_ticks: Arc<AtomicUsize>,
    pings_while_stalled: Arc<AtomicUsize>,
}

impl NotifySocket {
    fn bind(dir: &Path) -> NotifySocket {
        let path = dir.join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let pings = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(AtomicBool::new(false));
        let stalled_ticks = Arc::new(AtomicUsize::new(0));
        let pings_while_stalled = Arc::new(AtomicUsize::new(0));
        let (p, r) = (Arc::downgrade(&pings), ready.clone());
        let (st, ps) = (stalled_ticks.clone(), pings_while_stalled.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut stalled = false;
            // Ends when the test drops its counter.
            while let Some(pings) = p.upgrade() {
                let Ok(n) = sock.recv(&mut buf) else { continue };
                for line in String::from_utf8_lossy(&buf[..n]).lines() {
                    match line {
                        "WATCHDOG=1" => {
                            pings.fetch_add(1, Ordering::SeqCst);
                            if stalled {
                                ps.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        "READY=1" => r.store(true, Ordering::SeqCst),
                        l if l.starts_with("STATUS=stalled") => {
                            stalled = true;
                            st.fetch_add(1, Ordering::SeqCst);
                        }
                        l if l.starts_with("STATUS=") => stalled = false,
                        _ => {}
                    }
                }
            }
        });
        NotifySocket {
            path,
            pings,
            ready,
            stalled_ticks,
            pings_while_stalled,
        }
    }
}

/// Waits for a `WATCHDOG=1` after the `seen`-th one; says what did not happen.
fn next_ping(pings: &AtomicUsize, seen: usize, during: &str) -> Result<(), String> {
    let end = Instant::now() + PING_WAIT;
    while Instant::now() < end {
        if pings.load(Ordering::SeqCst) > seen {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(format!(
        "no WATCHDOG=1 within {PING_WAIT:?} {during} (after {seen} pings)"
    ))
}

/// A deployment chunk for an image (as `hawkbit.rs`'s: the file named `*.swu`).
fn swu_chunk(ddi: &DdiServer, version: &str, image: &[u8]) -> String {
    ddi.chunk("image", version, image).replace(
        &format!("\"filename\": \"image-{version}\""),
        &format!("\"filename\": \"image-{version}.swu\""),
    )
}

fn active_version(sb: &Sandbox) -> String {
    std::fs::read_link(sb.root.join("opt/svc/bin").join(NAME))
        .ok()
        .and_then(|t| t.file_name().map(|f| f.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

/// The partial download of the image in the cache, if any.
fn swu_part(cache: &Path) -> Option<PathBuf> {
    std::fs::read_dir(cache.join("swu"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".swu.part"))
}

/// A `.swu` (4.4 MiB) served 256 KiB at a time, each step only after a `WATCHDOG=1` that
/// came after the step before; every DDI answer only after a `WATCHDOG=1` that came after
/// its request. So the download spans at least 17 feed periods (8.5 s, four times the 2 s
/// watchdog interval) and each slow answer one, and both complete only while the agent
/// keeps feeding the watchdog. Before the fix the loop that fed it was inside the request.
#[test]
fn the_watchdog_is_fed_while_a_slow_swu_download_and_slow_answers_progress() {
    let ddi = DdiServer::start();
    let sb = machine("hb-watchdog-fed", &ddi);
    let notify = NotifySocket::bind(&sb.root);
    let body = fake_binary(NAME, "2.0.0", "hang", 0);
    let image = swu_image(&[(NAME, "2.0.0", &body)], &[&body], None, None);
    let problems: Arc<Mutex<Vec<String>>> = Arc::default();
    let steps = Arc::new(AtomicUsize::new(0));
    // After its first starvation a gate stops waiting (the test has failed already; the
    // rest only ends it sooner).
    let gate = |pings: Arc<AtomicUsize>, problems: Arc<Mutex<Vec<String>>>| {
        let starved = AtomicBool::new(false);
        move |during: String| {
            if starved.load(Ordering::SeqCst) {
                return;
            }
            let seen = pings.load(Ordering::SeqCst);
            if let Err(e) = next_ping(&pings, seen, &during) {
                starved.store(true, Ordering::SeqCst);
                problems.lock().unwrap().push(e);
            }
        }
    };
    {
        let mut s = ddi.state.lock().unwrap();
        let g = gate(notify.pings.clone(), problems.clone());
        let ready = notify.ready.clone();
        s.before_answer = Some(Arc::new(move || {
            if ready.load(Ordering::SeqCst) {
                g("while a DDI answer was slow".into());
            }
        }));
        let (g, steps) = (gate(notify.pings.clone(), problems.clone()), steps.clone());
        s.pace = Some(Arc::new(move |at| {
            g(format!("while the .swu download progressed (at byte {at})"));
            steps.fetch_add(1, Ordering::SeqCst);
            true
        }));
    }
    ddi.deploy("51", &format!("[{}]", swu_chunk(&ddi, "2.0.0", &image)));
    let mut agent = sb.spawn_agent(&[
        ("SVC_AGENT_FAST_START", "1"),
        ("NOTIFY_SOCKET", path_str(&notify.path)),
        ("WATCHDOG_USEC", WATCHDOG_USEC),
    ]);
    wait_for(
        "svc-server 2.0.0 out of the image to be active",
        300,
        || active_version(&sb) == "svc-server-2.0.0",
    );
    terminate(&mut agent);
    let problems = problems.lock().unwrap().clone();
    assert!(problems.is_empty(), "{problems:?}\n{}", sb.log());
    assert!(notify.ready.load(Ordering::SeqCst), "READY=1 was sent");
    // Every step of the image waited for a fresh ping.
    assert!(
        steps.load(Ordering::SeqCst) >= image.len() / crate::ddi_server::PACE_STEP,
        "{} steps",
        steps.load(Ordering::SeqCst)
    );
    assert!(!sb.log().contains("no longer feeding"), "{}", sb.log());
}

/// A plain poll (the app does not hold polls) that the app answers late, within the request's
/// deadline: the watchdog is fed while it waits. Before the fix the loop fed it only between
/// polls, a 30 s deadline against a 30 s feed period.
#[test]
fn the_watchdog_is_fed_while_a_plain_poll_waits_for_its_answer() {
    let (sb, srv) = app_sandbox("poll-watchdog", Front::Plain);
    let notify = NotifySocket::bind(&sb.root);
    srv.set_behavior(POLL, Behavior::Stall);
    let mut agent = sb.spawn_agent(&[
        ("SVC_AGENT_FAST_START", "1"),
        ("SVC_AGENT_POLL_HOLD_SECS", "0"),
        // Far longer than the pings below take, however busy the machine.
        ("SVC_AGENT_HTTP_TIMEOUT_SECS", "300"),
        ("NOTIFY_SOCKET", path_str(&notify.path)),
        ("WATCHDOG_USEC", WATCHDOG_USEC),
    ]);
    let waiting = || srv.polls().iter().filter(|p| p.status_sent == 0).count();
    wait_for("a poll the app holds", 60, || waiting() == 1);
    // Eight feed periods: twice the watchdog interval.
    let mut seen = notify.pings.load(Ordering::SeqCst);
    for _ in 0..8 {
        if let Err(e) = next_ping(
            &notify.pings,
            seen,
            "while a plain poll waited for its answer",
        ) {
            srv.set_behavior(POLL, Behavior::Normal);
            terminate(&mut agent);
            panic!("{e}\n{}", sb.log());
        }
        seen = notify.pings.load(Ordering::SeqCst);
    }
    assert_eq!(waiting(), 1, "the same poll still waits");
    assert_eq!(srv.polls().len(), 1);
    srv.set_behavior(POLL, Behavior::Normal);
    terminate(&mut agent);
}

/// A loop that stands still outside any bounded wait (a test hook holds it) is not covered
/// by the feeding thread: the pings stop, so systemd would restart the agent, and they come
/// back when the loop goes on.
#[test]
fn a_hung_loop_stops_the_pings() {
    let sb = Sandbox::new("watchdog-hung-loop");
    sb.file_app();
    sb.install_fake_server();
    let notify = NotifySocket::bind(&sb.root);
    let hang = sb.root.join("hang");
    let mut agent = sb.spawn_agent(&[
        ("SVC_AGENT_FAST_START", "1"),
        ("NOTIFY_SOCKET", path_str(&notify.path)),
        ("WATCHDOG_USEC", WATCHDOG_USEC),
        ("SVC_TEST_HANG_IF", path_str(&hang)),
    ]);
    next_ping(&notify.pings, 0, "from a live loop").unwrap();
    std::fs::write(&hang, "").unwrap();
    wait_for("the feeder to notice the hung loop", 60, || {
        sb.log().contains("no longer feeding")
    });
    // The window: eight of the feeder's ticks (twice the watchdog interval) with the loop
    // held, each told to systemd as a stalled status in place of a ping.
    wait_for("eight ticks of the feeder with the loop held", 120, || {
        notify.stalled_ticks.load(Ordering::SeqCst) >= 8
    });
    assert_eq!(
        notify.pings_while_stalled.load(Ordering::SeqCst),
        0,
        "WATCHDOG=1 while the loop was hung"
    );
    let at_stop = notify.pings.load(Ordering::SeqCst);
    std::fs::remove_file(&hang).unwrap();
    wait_for("the feeder to see the loop again", 60, || {
        sb.log().contains("feeding systemd's watchdog") && sb.log().contains("reports again")
    });
    next_ping(&notify.pings, at_stop, "after the loop went on").unwrap();
    terminate(&mut agent);
}

/// The agent is killed (as systemd's watchdog or a power cut would) in the middle of a
/// `.swu` download; the next start asks for the rest with `Range`, appends, checks the
/// whole and installs. Before the fix the partial file was deleted at the next start and the
/// whole image asked for again: a large image never arrived.
#[test]
fn a_swu_download_cut_by_a_kill_resumes_after_the_restart_and_installs() {
    let ddi = DdiServer::start();
    let sb = machine("hb-swu-resume", &ddi);
    let body = fake_binary(NAME, "2.0.0", "hang", 1024 * 1024);
    let image = swu_image(&[(NAME, "2.0.0", &body)], &[&body], None, None);
    let half = image.len() / 2;
    let release = Arc::new(AtomicBool::new(false));
    {
        // The first answer stops at half the image until the agent is gone, then closes.
        let release = release.clone();
        ddi.state.lock().unwrap().pace = Some(Arc::new(move |at| {
            if at < half {
                return true;
            }
            while !release.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            false
        }));
    }
    ddi.deploy("52", &format!("[{}]", swu_chunk(&ddi, "2.0.0", &image)));
    let cache = sb.root.join("opt/svc/cache");
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_FAST_START", "1")]);
    wait_for("half the image in the agent's partial file", 120, || {
        swu_part(&cache)
            .and_then(|p| std::fs::metadata(p).ok())
            .is_some_and(|m| m.len() as usize >= half)
    });
    crate::powercut_campaign::power_cut(Some(&mut agent), &sb.root);
    {
        let mut s = ddi.state.lock().unwrap();
        s.pace = None;
        release.store(true, Ordering::SeqCst);
    }
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_FAST_START", "1")]);
    wait_for(
        "svc-server 2.0.0 out of the image to be active",
        300,
        || active_version(&sb) == "svc-server-2.0.0",
    );
    terminate(&mut agent);
    let s = ddi.state.lock().unwrap();
    let resumed_at: Vec<usize> = s
        .ranges
        .iter()
        .filter_map(|r| r.strip_prefix("bytes=")?.trim_end_matches('-').parse().ok())
        .collect();
    assert!(
        resumed_at.iter().any(|&n| n >= half),
        "the restart asked for the rest with Range: {:?}\n{}",
        s.ranges,
        sb.log()
    );
    assert!(
        s.served < 2 * image.len(),
        "{} bytes served for an image of {}",
        s.served,
        image.len()
    );
    assert!(swu_part(&cache).is_none(), "no partial file left");
}

/// SIGTERM (systemd stopping the unit) while the loop is inside a slow `.swu` download: the
/// download stops at its next chunk with its bytes kept, and the agent stops svc-server and
/// exits cleanly. Before, the stop waited for the download to end (its request's deadline is
/// 300 s), past systemd's stop timeout, which then killed svc-server with the agent.
#[test]
fn a_stop_during_a_slow_swu_download_is_clean_and_keeps_the_partial_file() {
    let ddi = DdiServer::start();
    let sb = machine("hb-swu-stop", &ddi);
    let body = fake_binary(NAME, "2.0.0", "hang", 0);
    let image = swu_image(&[(NAME, "2.0.0", &body)], &[&body], None, None);
    let half = image.len() / 2;
    // Half the image at once; then one step per token; then nothing until the test ends.
    let tokens = Arc::new(AtomicUsize::new(0));
    let end = Arc::new(AtomicBool::new(false));
    {
        let (tokens, end) = (tokens.clone(), end.clone());
        ddi.state.lock().unwrap().pace = Some(Arc::new(move |at| {
            if at < half {
                return true;
            }
            loop {
                if end.load(Ordering::SeqCst) {
                    return false;
                }
                let t = tokens.load(Ordering::SeqCst);
                if t > 0
                    && tokens
                        .compare_exchange(t, t - 1, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }));
    }
    ddi.deploy("53", &format!("[{}]", swu_chunk(&ddi, "2.0.0", &image)));
    let cache = sb.root.join("opt/svc/cache");
    let mut agent = sb.spawn_agent(&[("SVC_AGENT_FAST_START", "1")]);
    wait_for("half the image in the agent's partial file", 120, || {
        swu_part(&cache)
            .and_then(|p| std::fs::metadata(p).ok())
            .is_some_and(|m| m.len() as usize >= half)
    });
    svc::sys::kill(agent.id() as i32, libc::SIGTERM);
    // One more step reaches the agent; the rest waits (as a stalled link would).
    tokens.store(1, Ordering::SeqCst);
    let end_status = {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = agent.try_wait().unwrap() {
                break Some(st);
            }
            if Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    end.store(true, Ordering::SeqCst);
    let Some(status) = end_status else {
        let _ = agent.kill();
        let _ = agent.wait();
        panic!(
            "the agent did not stop within 60 s of SIGTERM during a download\n{}",
            sb.log()
        );
    };
    assert!(status.success(), "{status:?}\n{}", sb.log());
    let log = sb.log();
    assert!(log.contains("kept for resuming"), "{log}");
    assert!(
        log.contains("(signal 15)"),
        "svc-server stopped by TERM: {log}"
    );
    let kept = swu_part(&cache).expect("the partial file is kept");
    assert!(std::fs::metadata(kept).unwrap().len() as usize >= half);
}

/// The backend alone, each poll by a new transport (as after a restart), downloads cut by
/// the server after half the image and not retried in the same poll.
struct Backend {
    paths: Paths,
    ddi: DdiServer,
    image: Vec<u8>,
}

impl Backend {
    fn new(test: &str) -> Backend {
        let paths = sandbox(&format!("hawkbit-resume-{test}"));
        install_old(&paths, NAME, "1.0.0");
        let token = paths.device("/etc/svc-hawkbit.token");
        svc::fsutil::atomic_write(&token, format!("{TOKEN}\n").as_bytes(), 0o600).unwrap();
        let ddi = DdiServer::start();
        let body = fake_binary(NAME, "2.0.0", "ok", 256 * 1024);
        let image = swu_image(&[(NAME, "2.0.0", &body)], &[&body], None, None);
        ddi.deploy("61", &format!("[{}]", swu_chunk(&ddi, "2.0.0", &image)));
        ddi.state
            .lock()
            .unwrap()
            .cut_after
            .push_back(image.len() / 2);
        Backend { paths, ddi, image }
    }

    fn poll(&self) -> Result<PollOutcome, ProtocolError> {
        let cfg = json!({"agent": {"svc-agent": {"hawkbit": {
            "server_url": self.ddi.url(), "tenant": TENANT,
            "controller_id": CONTROLLER, "auth": "target-token"}}}});
        let (cfg, _) = svc::config::parse_value(&cfg).unwrap();
        let opts = DownloadOptions {
            max_attempts: 1,
            ..test_opts().download
        };
        HawkbitTransport::connect(&self.paths, cfg.agent.agent.hawkbit.as_ref().unwrap())
            .unwrap()
            .with_download_options(opts)
            .poll(&serde_json::Value::Null, None)
    }

    /// The first poll: the download is cut at half and kept.
    fn cut(&self) -> PathBuf {
        let e = self.poll().unwrap_err();
        assert!(matches!(e, ProtocolError::Network(_)), "{e}");
        let part = swu_part(&self.paths.cache_dir()).expect("the partial file is kept");
        assert_eq!(
            std::fs::metadata(&part).unwrap().len() as usize,
            self.image.len() / 2
        );
        part
    }

    fn server_targets(&self) -> bool {
        match self.poll() {
            Ok(PollOutcome::Changed { answer, .. }) => answer.targets.server.is_some(),
            other => panic!("{other:?}"),
        }
    }

    fn ranges(&self) -> Vec<String> {
        self.ddi.state.lock().unwrap().ranges.clone()
    }

    fn served(&self) -> usize {
        self.ddi.state.lock().unwrap().served
    }
}

#[test]
fn a_cut_swu_download_resumes_with_range_at_the_next_poll() {
    let b = Backend::new("range");
    b.cut();
    assert!(b.server_targets(), "the image's svc-server is offered");
    assert_eq!(b.ranges(), [format!("bytes={}-", b.image.len() / 2)]);
    assert_eq!(b.served(), b.image.len(), "every byte served once");
    assert!(swu_part(&b.paths.cache_dir()).is_none());
}

#[test]
fn a_server_that_ignores_range_gets_a_clean_download_from_the_start() {
    let b = Backend::new("no-range");
    b.cut();
    b.ddi.state.lock().unwrap().ignore_range = true;
    assert!(b.server_targets(), "the image's svc-server is offered");
    assert_eq!(b.ranges().len(), 1, "asked with Range once");
    assert_eq!(b.served(), b.image.len() / 2 + b.image.len());
}

#[test]
fn a_partial_file_larger_than_the_image_is_discarded_and_downloaded_again() {
    let b = Backend::new("oversize");
    let part = b.cut();
    std::fs::write(&part, vec![b'x'; b.image.len() + 1]).unwrap();
    assert!(b.server_targets(), "the image's svc-server is offered");
    assert!(
        b.ranges().is_empty(),
        "no Range from a file that is not a prefix"
    );
    assert_eq!(b.served(), b.image.len() / 2 + b.image.len());
}

#[test]
fn a_partial_file_with_bytes_not_of_the_image_is_discarded_with_a_clear_error() {
    let b = Backend::new("tampered");
    let part = b.cut();
    let mut bytes = std::fs::read(&part).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&part, bytes).unwrap();
    // Refused and told (a poll that worked, issue 46): the server hears the mismatch.
    assert!(!b.server_targets());
    let fb = b.ddi.feedback();
    let last = &fb.last().expect("feedback").1;
    assert_eq!(last["status"]["result"]["finished"], "failure");
    assert!(
        last["status"]["details"][0].to_string().contains("sha256"),
        "{last}"
    );
    assert!(swu_part(&b.paths.cache_dir()).is_none(), "discarded");
    assert!(!b.paths.cache_dir().join("swu/files").exists());
    // A transfer fault: offered again (Force update), the image is downloaded again whole.
    let chunk = swu_chunk(&b.ddi, "2.0.0", &b.image);
    b.ddi.deploy("61", &format!("[{chunk}]"));
    assert!(b.server_targets(), "downloaded again and taken");
}

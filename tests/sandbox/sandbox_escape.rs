//! Escape attempts through the real runtime, with containment checked from the host side:
//! canary files outside the sandbox stay unread and unchanged, a loopback listener receives
//! nothing, the stdlib mount is unchanged, the host's environment stays invisible.

use crate::common;

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;

use crate::common::{host, run};
use sha2::{Digest, Sha256};
use vivarium::Status;

/// A host file with secret content the guest must not see or change.
struct Canary {
    dir: PathBuf,
    file: PathBuf,
}

const SECRET: &str = "canary-7f3e9b1c-host-secret";

impl Canary {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("vivarium-canary-{}", common::rand_u32()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("secret.txt");
        std::fs::write(&file, SECRET).unwrap();
        Canary { dir, file }
    }

    fn assert_intact(&self) {
        assert_eq!(std::fs::read_to_string(&self.file).unwrap(), SECRET);
        assert_eq!(
            std::fs::read_dir(&self.dir).unwrap().count(),
            1,
            "nothing new beside it"
        );
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `code` with `{canary}` and `{scratch}` replaced by host paths; asserts the secret never
/// shows up and the canary is intact.
fn attempt(code: &str) -> vivarium::Report {
    let canary = Canary::new();
    let code = code
        .replace("{canary}", canary.file.to_str().unwrap())
        .replace("{canary_dir}", canary.dir.to_str().unwrap())
        .replace("{scratch}", host().scratch_root().to_str().unwrap());
    let r = run(&code);
    assert!(
        !r.stdout.contains(SECRET) && !r.stderr.contains(SECRET),
        "secret leaked: {r:?}"
    );
    for f in &r.files {
        let content = f.content.as_deref().unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(content).contains(SECRET),
            "secret leaked into {}",
            f.path
        );
    }
    canary.assert_intact();
    r
}

/// Each line of `probe` output is `name:outcome`; every outcome must be an error.
const PROBE: &str = "
def probe(name, f):
    try:
        out = f()
        print(f'{name}:OK:{out!r}'[:200])
    except BaseException as e:
        print(f'{name}:ERR:{type(e).__name__}')
";

fn assert_all_refused(r: &vivarium::Report) {
    assert_eq!(r.status, Status::Ok, "{}", r.stderr);
    assert!(!r.stdout.is_empty());
    for line in r.stdout.lines() {
        assert!(line.contains(":ERR:"), "not refused: {line}");
    }
}

#[test]
fn host_files_are_out_of_reach() {
    let r = attempt(&format!(
        "{PROBE}
probe('etc_passwd', lambda: open('/etc/passwd').read())
probe('canary_abs', lambda: open('{{canary}}').read())
probe('canary_dir', lambda: __import__('os').listdir('{{canary_dir}}'))
probe('dotdot', lambda: open('../../../../../../etc/passwd').read())
probe('dotdot_canary', lambda: open('../../../../../..{{canary}}').read())
probe('proc', lambda: open('/proc/self/environ').read())
probe('dev', lambda: open('/dev/zero', 'rb').read(1))
probe('scratch', lambda: __import__('os').listdir('{{scratch}}'))
probe('write_canary', lambda: open('{{canary}}', 'w').write('pwned'))
probe('write_abs', lambda: open('/etc/vivarium-pwned', 'w').write('x'))
"
    ));
    assert_all_refused(&r);
}

#[test]
fn symlinks_and_hardlinks_do_not_lead_out() {
    let passwd = std::fs::read("/etc/passwd").unwrap();
    let r = attempt(&format!(
        "{PROBE}
import os
for name, target in [('l1', '/etc/passwd'), ('l2', '{{canary}}'), ('l3', '../../../../..{{canary}}'), ('l4', '..')]:
    try:
        os.symlink(target, name)
    except OSError:
        pass
    probe('read_' + name, lambda name=name: open(name).read())
probe('hardlink', lambda: os.link('{{canary}}', 'hl'))
probe('hardlink_rel', lambda: os.link('../../../../..{{canary}}', 'hl2'))
probe('list_via_link', lambda: os.listdir('l4/..'))
"
    ));
    assert_all_refused(&r);
    assert!(!r.stdout.contains("root:"));
    // Writing through the names may create plain files inside the sandbox, never outside.
    let r = attempt(
        "import os
for name, target in [('l1', '/etc/passwd'), ('l2', '{canary}'), ('l3', '../../../../..{canary}')]:
    try:
        os.symlink(target, name)
    except OSError:
        pass
    try:
        open(name, 'w').write('pwned')
    except OSError:
        pass
",
    );
    assert_eq!(r.status, Status::Ok, "{}", r.stderr);
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), passwd);
}

#[test]
fn the_stdlib_mount_is_read_only() {
    let zip = host().runtime_files().stdlib_dir.join("python315.zip");
    let before = Sha256::digest(std::fs::read(&zip).unwrap());
    let mode_before = std::fs::metadata(&zip).unwrap().permissions();
    let r = attempt(&format!(
        "{PROBE}
import os
Z = '/usr/local/lib/python315.zip'
probe('truncate', lambda: open(Z, 'w'))
probe('append', lambda: open(Z, 'a').write('x'))
probe('rename', lambda: os.rename(Z, '/usr/local/lib/x.zip'))
probe('rename_out', lambda: os.rename(Z, '/stolen.zip'))
probe('unlink', lambda: os.remove(Z))
probe('new_file', lambda: open('/usr/local/lib/evil.py', 'w'))
probe('mkdir', lambda: os.mkdir('/usr/local/lib/evil'))
probe('mpl_write', lambda: open('/usr/local/lib/python315.zip/matplotlib/mpl-data/matplotlibrc', 'w'))
probe('truncate_fd', lambda: os.truncate(Z, 0))
"
    ));
    assert_all_refused(&r);
    assert_eq!(Sha256::digest(std::fs::read(&zip).unwrap()), before);
    // WASI has no chmod: Python's os.chmod is a no-op there; the host file must not change.
    let _ = run(
        "import os\ntry:\n    os.chmod('/usr/local/lib/python315.zip', 0o777)\nexcept OSError:\n    pass",
    );
    assert_eq!(std::fs::metadata(&zip).unwrap().permissions(), mode_before);
    assert_eq!(std::fs::read_dir(zip.parent().unwrap()).unwrap().count(), 1);
}

#[test]
fn no_network_reaches_a_loopback_listener() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let r = attempt(&format!(
        "{PROBE}
import socket
def connect():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.connect(('127.0.0.1', {port}))
    s.sendall(b'escaped')
probe('tcp', connect)
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b'escaped', ('127.0.0.1', {port}))
probe('udp', udp)
probe('dns', lambda: socket.getaddrinfo('localhost', {port}))
import urllib.request
probe('urllib', lambda: urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=1).read())
import asyncio
probe('asyncio', lambda: asyncio.run(asyncio.open_connection('127.0.0.1', {port})))
"
    ));
    assert_all_refused(&r);
    std::thread::sleep(Duration::from_millis(100));
    match listener.accept() {
        Ok((mut s, _)) => {
            let mut buf = Vec::new();
            let _ = s.read_to_end(&mut buf);
            panic!("the guest reached the listener: {buf:?}");
        }
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock),
    }
}

#[test]
fn no_processes_can_be_started() {
    let r = attempt(&format!(
        "{PROBE}
import os, subprocess
probe('system', lambda: os.system('touch {{canary_dir}}/pwned'))
probe('popen', lambda: os.popen('id').read())
probe('subprocess', lambda: subprocess.run(['touch', '{{canary_dir}}/pwned']))
probe('fork', lambda: os.fork())
probe('execv', lambda: os.execv('/bin/sh', ['sh']))
probe('spawn', lambda: os.posix_spawn('/bin/sh', ['sh'], {{}}))
probe('kill', lambda: os.kill(1, 9))
import multiprocessing
probe('mp', lambda: multiprocessing.Process(target=print).start())
import threading
probe('thread', lambda: threading.Thread(target=print).start())
"
    ));
    assert_all_refused(&r);
}

#[test]
fn the_host_environment_is_invisible() {
    // SAFETY: set before any sandbox of this test reads the host environment; the guest's
    // environment is built from scratch anyway, which is what this checks.
    unsafe { std::env::set_var("VIVARIUM_HOST_CANARY", SECRET) };
    let r =
        attempt("import os\nprint(sorted(os.environ))\nprint(os.getcwd(), os.uname().nodename)");
    assert_eq!(
        r.stdout.lines().next().unwrap(),
        "['HOME', 'PYTHONTZPATH', 'TMPDIR']"
    );
}

#[test]
fn the_host_door_refuses_garbage() {
    let r = attempt(&format!(
        "{PROBE}
import _host
probe('empty', lambda: _host.call(b''))
probe('garbage', lambda: _host.call(b'\\xff' * 100000))
probe('tools', lambda: __import__('host').tools)
"
    ));
    assert_all_refused(&r);
}

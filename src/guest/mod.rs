//! The guest's facts, in one place: where things are inside the sandbox, the fixed preopen
//! table, the base environment, the `turn` export's return codes, and the Python snippets
//! the host runs in hidden turns.
//!
//! Templates snapshot the interpreter after it has seen this layout, so everything here is
//! part of a template's cache key (`template::cache_key`): change a path or the table's order
//! and every template is rebuilt.

mod env;
mod language;
mod mounts;
pub mod queries;
mod setup;
mod snippets;

use std::path::Path;

use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

pub use env::{EnvError, check_env, guest_env};
pub use language::{
    Language, command_source, guest_source, needs_notebook, pip_install_line, pip_requirements,
    run_file_source,
};
pub use mounts::{Lent, MountPoint, below, check_mount_points};
pub use setup::{
    GuestSetup, SETUP_LIMITS, UNDO_TURN_ENV, env_literal, packages_on_path, setup_code, turn_env,
};
pub use snippets::{
    COMPILE_PACKAGES, FLUSH_LIMITS, FLUSH_OPEN_FILES, GUEST_HELPERS, LINE_BUFFERED,
    NETWORK_INSTALL, SCIENTIFIC_IMPORTS, SESSION_HOOKS, SHOW_OPEN_FIGURES, SNAPSHOT_READY,
};

/// `argv[0]` the reference host passes; only `sys.orig_argv[0]` shows it.
pub const ARGV0: &str = "/usr/local/bin/python.wasm";
/// Where the guest finds its standard library: a folder holding only `python315.zip`.
pub const STDLIB_DIR: &str = "/usr/local/lib";
/// matplotlib's data, preopened from the unpacked runtime (the zip cannot serve it).
pub const MPL_DATA_DIR: &str = "/usr/local/lib/python315.zip/matplotlib/mpl-data";
/// Where a sandbox's extra packages are (read-only; an empty folder when it has none), put
/// on `sys.path` by the set-up turn when there are some.
pub const PACKAGES_DIR: &str = "/usr/local/lib/vivarium-packages";
/// The guest path of HOME (inside the sandbox's `/tmp`).
pub const HOME: &str = "/tmp/home";
/// Mount-point stubs and the scratch `/tmp` with HOME, made in every sandbox directory (and
/// in the template build's placeholder root) before the guest starts.
pub const STUB_DIRS: [&str; 2] = ["usr/local/lib", "tmp/home"];
/// Top-level names inside the sandbox directory that [`STUB_DIRS`] create: not the run's
/// output.
pub const HOST_LAYOUT_DIRS: [&str; 2] = ["usr", "tmp"];
/// Descriptors 0, 1 and 2: the guest's stdin, stdout and stderr.
pub const STDIO_FDS: u32 = 3;
/// Descriptors open before the guest opens any: stdio and the preopens.
pub const INITIAL_FDS: u32 = STDIO_FDS + PREOPENS.len() as u32;

/// Which host directory a preopen shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostDir {
    /// The unpacked runtime's stdlib folder.
    Stdlib,
    /// The unpacked runtime's mpl-data.
    MplData,
    /// The sandbox's own working directory (a placeholder during a template build).
    Root,
    /// The sandbox's package environment (an empty folder without packages, and during a
    /// template build).
    Packages,
}

/// One preopened directory: the guest path, what it shows, and how.
#[derive(Debug, Clone, Copy)]
pub struct Preopen {
    /// The path the guest sees.
    pub guest_path: &'static str,
    /// The host directory behind it.
    pub host: HostDir,
    /// Read-only, or read-write.
    pub perms: FsPerms,
}

/// The preopen table, in descriptor order (fd 3, 4, 5, 6). Fixed: templates snapshot it, so
/// a sandbox must get exactly this table; what differs between sandboxes is only which host
/// folder is behind `/` and behind [`PACKAGES_DIR`].
pub const PREOPENS: [Preopen; 4] = [
    Preopen {
        guest_path: STDLIB_DIR,
        host: HostDir::Stdlib,
        perms: FsPerms::ReadOnly,
    },
    Preopen {
        guest_path: MPL_DATA_DIR,
        host: HostDir::MplData,
        perms: FsPerms::ReadOnly,
    },
    Preopen {
        guest_path: "/",
        host: HostDir::Root,
        perms: FsPerms::ReadWrite,
    },
    Preopen {
        guest_path: PACKAGES_DIR,
        host: HostDir::Packages,
        perms: FsPerms::ReadOnly,
    },
];

/// The host directories behind [`PREOPENS`].
#[derive(Debug, Clone, Copy)]
pub struct HostDirs<'a> {
    /// Behind [`STDLIB_DIR`].
    pub stdlib: &'a Path,
    /// Behind [`MPL_DATA_DIR`].
    pub mpl_data: &'a Path,
    /// Behind `/`.
    pub root: &'a Path,
    /// Behind [`PACKAGES_DIR`].
    pub packages: &'a Path,
    /// [`PACKAGES_DIR`] read-write instead of read-only: only for the host's own compile
    /// sandbox, which writes the environment's `.pyc` files.
    pub packages_writable: bool,
}

/// Preopens [`PREOPENS`] on `wasi`, in order: the only way a guest's filesystem is made,
/// for sandboxes and template builds alike.
pub fn preopen(wasi: &mut WasiCtxBuilder, dirs: &HostDirs<'_>) -> wasmtime::Result<()> {
    for p in PREOPENS {
        let host = match p.host {
            HostDir::Stdlib => dirs.stdlib,
            HostDir::MplData => dirs.mpl_data,
            HostDir::Root => dirs.root,
            HostDir::Packages => dirs.packages,
        };
        let perms = match p.host {
            HostDir::Packages if dirs.packages_writable => FsPerms::ReadWrite,
            _ => p.perms,
        };
        wasi.preopened_dir(host, p.guest_path, perms)?;
    }
    Ok(())
}

/// Preopens the folders of `mounts` after [`PREOPENS`] (fd 7 on), in order: each volume's
/// files, then, for a writable one, the folder its writes wait in (the host's, not named to
/// the guest's C library: `hostcalls/mounts.rs` reaches both). Returns their descriptors,
/// as `(files, incoming)`.
pub fn preopen_mounts(
    wasi: &mut WasiCtxBuilder,
    mounts: &[Lent],
) -> wasmtime::Result<Vec<(u32, Option<u32>)>> {
    let mut next = INITIAL_FDS;
    let mut fds = Vec::new();
    for (i, m) in mounts.iter().enumerate() {
        let perms = if m.writable() {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        wasi.preopened_dir(&m.files, m.at.as_str(), perms)?;
        let files = next;
        next += 1;
        let incoming = match &m.incoming {
            Some(dir) => {
                wasi.preopened_dir(dir, format!("/.vivarium-incoming-{i}"), FsPerms::ReadWrite)?;
                next += 1;
                Some(next - 1)
            }
            None => None,
        };
        fds.push((files, incoming));
    }
    Ok(fds)
}

/// What the guest's `turn` export returns (`shared/guest-abi.md`, `turn`).
pub mod turn_abi {
    /// The guest refused the turn: nothing ran (after a trap, `run` or `shutdown`).
    pub const REFUSED: i32 = -1;
    /// The low byte is the turn's exit status.
    pub const STATUS_MASK: i32 = 0xFF;
    /// Set when the code called `exit()`/`quit()`: the interpreter takes no more turns.
    pub const ENDED: i32 = 256;
}

/// The `host::call` door's result channel (see `hostcalls::door`): a request starting with
/// this tag carries the `repr` of a turn's final value. A kept interpreter's displayhook
/// (`_session_hooks` in `python-wasi/guest/setup.py`) sends it before the value's echo, and stdout is then not seen live for the rest of the turn.
pub const RESULT_TAG: &[u8] = b"\0vivarium-result\0";
/// The whole of the door request pyplot's backend sends when it makes a figure
/// (`python-wasi/guest/display.py`): the host then runs [`SHOW_OPEN_FIGURES`] after the turn.
pub const FIGURE_TAG: &[u8] = b"\0vivarium-figure\0";
/// The whole of the door request a session's excepthook sends before it prints an uncaught
/// exception's traceback (`_session_hooks`): stderr is then not seen live for the rest of
/// the turn (the traceback comes back as the report's error).
pub const ERROR_TAG: &[u8] = b"\0vivarium-error\0";
/// The prefix of the door request `input(prompt)` sends in a session (`_session_hooks`),
/// followed by the prompt: answered with the line when the turn's client can answer
/// (`hostcalls::input`), else "no host", and `input()` reads stdin.
pub const INPUT_TAG: &[u8] = b"\0vivarium-input\0";
/// The prefix of a round of code mode's tool calls (`python-wasi/guest/tools.py`), followed
/// by their JSON: answered by `hostcalls::tools` when the run was given tools.
pub const TOOLS_TAG: &[u8] = b"\0vivarium-tools\0";
/// The prefix of an outbound HTTP request (`python-wasi/guest/net.py`), followed by a JSON
/// line (`{scheme, host, port}`) and the raw HTTP/1.1 request: answered by
/// `hostcalls::egress` when the run was granted network.
pub const EGRESS_TAG: &[u8] = b"\0vivarium-http\0";
/// The prefix of the door's answer to an outbound request it refused, followed by the
/// refusal's JSON (`{reason, message}`); any other answer is the raw HTTP/1.1 response.
pub const REFUSED_TAG: &[u8] = b"\0refused\0";
/// The prefix of the door request the template build's last init turn sends to make objects
/// immortal, followed by their addresses as little-endian `u32`s. Only a template build's
/// door answers it (`template::immortal`); a sandbox's door says "no host".
pub const IMMORTAL_TAG: &[u8] = b"\0vivarium-immortal\0";
/// The largest result kept; the displayhook truncates to it before sending, and the host
/// refuses more.
pub const MAX_RESULT_BYTES: usize = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_check_starts_past_the_preopens() {
        // SNAPSHOT_READY is Python text: it names the first descriptor past the preopens.
        assert!(SNAPSHOT_READY.contains(&format!("range({INITIAL_FDS}, 256)")));
        assert!(COMPILE_PACKAGES.contains(&format!("{PACKAGES_DIR:?}").replace('"', "'")));
        // It sends the immortal tag as a Python bytes literal.
        let tag = String::from_utf8_lossy(IMMORTAL_TAG).replace('\0', "\\0");
        assert!(SNAPSHOT_READY.contains(&format!("b'{tag}'")));
        // The tools' module spells the tools' tag itself.
        let tag = String::from_utf8_lossy(TOOLS_TAG).replace('\0', "\\0");
        assert!(GUEST_HELPERS[3].1.contains(&format!("b\"{tag}\"")));
        // So does the network's, with its refusal's prefix.
        for t in [EGRESS_TAG, REFUSED_TAG] {
            let tag = String::from_utf8_lossy(t).replace('\0', "\\0");
            assert!(GUEST_HELPERS[4].1.contains(&format!("b\"{tag}\"")), "{tag}");
        }
    }

    /// A kept interpreter's hooks (`_vivarium`) spell the door's tags and the result's cap
    /// themselves: they must agree with the host's.
    #[test]
    fn the_session_hooks_send_what_the_door_reads() {
        let setup = GUEST_HELPERS[2];
        assert_eq!(setup.0, "_vivarium");
        for (name, tag) in [
            ("RESULT_TAG", RESULT_TAG),
            ("ERROR_TAG", ERROR_TAG),
            ("INPUT_TAG", INPUT_TAG),
        ] {
            let tag = String::from_utf8_lossy(tag).replace('\0', "\\0");
            assert!(
                setup.1.contains(&format!("\n{name} = b\"{tag}\"\n")),
                "{name}"
            );
        }
        assert!(
            setup
                .1
                .contains(&format!("\nMAX_RESULT_BYTES = {MAX_RESULT_BYTES}\n"))
        );
    }
}

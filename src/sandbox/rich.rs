//! Rich outputs, as a notebook gives them, and the prelude that loads guest-side helpers.
//!
//! [`prelude`] builds the Python a front door runs as a hidden turn before the program
//! ([`super::Sandbox::prelude`]): it loads `python-wasi/guest/display.py` as the module
//! `vivarium_display` (making `display` a builtin and routing matplotlib's `plt.show()` to it),
//! and, for streaming, makes stdout and stderr line-buffered so chunks leave as they are
//! printed. It then resets the guest's turn counter, so the program is still `<turn 1>` in
//! tracebacks.
//!
//! The guest writes each output as a file `NNNN.<ext>` under [`OUTPUT_DIR`] of its working
//! directory; [`take_outputs`] reads them after the run through `cap-std` (so a symlink
//! cannot lead out), with a cap per output and in total, keeps only the four known
//! extensions, and removes them. Nothing else of them is trusted: a program may fake or
//! delete its own outputs, which harms only its own result.

use std::io::Read;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::report::RichOutput;

/// The guest-side helper, loaded by the prelude.
pub const DISPLAY_SOURCE: &str = include_str!("../../python-wasi/guest/display.py");
/// Where the helper writes outputs, relative to the working directory (`/tmp/...` in the guest).
pub const OUTPUT_DIR: &str = "tmp/.vivarium/outputs";
/// At most this many outputs are returned (the helper stops at the same number).
pub const MAX_OUTPUTS: usize = 64;
/// The largest single output returned; a larger file is skipped.
pub const MAX_OUTPUT_BYTES: u64 = 8 << 20;
/// The most bytes of outputs returned in all.
pub const MAX_TOTAL_BYTES: u64 = 16 << 20;

/// The helper's code object, marshalled by the guest's own CPython (hex), once per process:
/// loading it costs a fraction of compiling the source in every sandbox.
static DISPLAY_BYTECODE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Records the helper's marshalled code object (see [`compile_program`]); later preludes use
/// it instead of the source.
pub fn set_display_bytecode(hex: String) {
    let _ = DISPLAY_BYTECODE.set(hex);
}

pub fn has_display_bytecode() -> bool {
    DISPLAY_BYTECODE.get().is_some()
}

/// A program printing the marshalled code object of `source` as hex: run it in a fresh
/// sandbox, check the output with [`valid_hex`], and pass it to [`exec_bytecode`]. (The
/// host cannot make it: its own Python is not the guest's 3.15.)
pub fn compile_program(source: &str, filename: &str) -> String {
    let src = serde_json::to_string(source).expect("a string serialises");
    let name = serde_json::to_string(filename).expect("a string serialises");
    format!(
        "import marshal, sys\nsys.stdout.write(marshal.dumps(compile({src}, {name}, 'exec', dont_inherit=True)).hex())\n"
    )
}

/// Whether `s` is lowercase hex of a plausible size (what [`compile_program`] prints).
pub fn valid_hex(s: &str) -> bool {
    !s.is_empty()
        && s.len().is_multiple_of(2)
        && s.len() <= 4 << 20
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A Python expression statement running marshalled code in the namespace `ns`.
pub fn exec_bytecode(hex: &str, ns: &str) -> String {
    format!("exec(__import__('marshal').loads(bytes.fromhex('{hex}')), {ns})")
}

/// Python for the hidden turn before a program. `rich` loads `display()` and the matplotlib
/// backend; `line_buffered` makes stdout/stderr flush at each newline (streaming).
pub fn prelude(rich: bool, line_buffered: bool) -> String {
    let load = match DISPLAY_BYTECODE.get() {
        Some(hex) => exec_bytecode(hex, "m.__dict__"),
        None => {
            // A JSON string is a valid Python string literal.
            let source = serde_json::to_string(DISPLAY_SOURCE).expect("a string serialises");
            format!("exec(compile({source}, '<vivarium_display>', 'exec'), m.__dict__)")
        }
    };
    format!(
        "\
def __vivarium_prelude():
    import sys
    if {rich}:
        import types
        m = types.ModuleType('vivarium_display')
        m.__file__ = '<vivarium_display>'
        {load}
        sys.modules['vivarium_display'] = m
        m.install()
    if {line_buffered}:
        for s in (sys.stdout, sys.stderr):
            try:
                s.reconfigure(line_buffering=True)
            except Exception:
                pass
    # This hidden turn does not count: the program is still <turn 1>.
    import _reactor
    _reactor._turns = 0
__vivarium_prelude()
del __vivarium_prelude
",
        rich = if rich { "True" } else { "False" },
        line_buffered = if line_buffered { "True" } else { "False" },
    )
}

/// The media type of an output file, by its extension; `None` for anything else.
fn mime(name: &str) -> Option<&'static str> {
    let (stem, ext) = name.rsplit_once('.')?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match ext {
        "png" => Some("image/png"),
        "svg" => Some("image/svg+xml"),
        "html" => Some("text/html"),
        "txt" => Some("text/plain"),
        _ => None,
    }
}

/// Reads (and removes) the outputs the guest wrote under [`OUTPUT_DIR`] of `root`, in order.
/// PNG data is base64; the text types are UTF-8 (invalid bytes replaced).
pub fn take_outputs(root: &Path) -> Vec<RichOutput> {
    let Ok(dir) = cap_std::fs::Dir::open_ambient_dir(root, cap_std::ambient_authority()) else {
        return Vec::new();
    };
    let Ok(out_dir) = dir.open_dir(OUTPUT_DIR) else {
        return Vec::new();
    };
    let Ok(entries) = out_dir.entries() else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| mime(n).is_some())
        .take(4 * MAX_OUTPUTS)
        .collect();
    names.sort();
    let mut outputs = Vec::new();
    let mut total = 0u64;
    for name in &names {
        let read = (|| -> Option<Vec<u8>> {
            let f = out_dir.open(name).ok()?;
            let meta = f.metadata().ok()?;
            if !meta.is_file() || meta.len() > MAX_OUTPUT_BYTES {
                return None;
            }
            let mut bytes = Vec::new();
            f.take(MAX_OUTPUT_BYTES + 1).read_to_end(&mut bytes).ok()?;
            (bytes.len() as u64 <= MAX_OUTPUT_BYTES).then_some(bytes)
        })();
        let _ = out_dir.remove_file(name);
        let (Some(bytes), Some(mime)) = (read, mime(name)) else {
            continue;
        };
        if outputs.len() >= MAX_OUTPUTS || total + bytes.len() as u64 > MAX_TOTAL_BYTES {
            continue;
        }
        total += bytes.len() as u64;
        let data = if mime == "image/png" {
            STANDARD.encode(&bytes)
        } else {
            String::from_utf8_lossy(&bytes).into_owned()
        };
        outputs.push(RichOutput {
            mime: mime.to_string(),
            data,
        });
    }
    outputs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_numbered_known_files_count() {
        assert_eq!(mime("0001.png"), Some("image/png"));
        assert_eq!(mime("0002.html"), Some("text/html"));
        assert_eq!(mime("x.png"), None);
        assert_eq!(mime("0001.exe"), None);
        assert_eq!(mime(".png"), None);
    }

    #[test]
    fn reads_in_order_and_skips_symlinks_out() {
        let root = std::env::temp_dir().join(format!("vivarium-rich-{}", std::process::id()));
        let dir = root.join(OUTPUT_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("0002.txt"), "second").unwrap();
        std::fs::write(dir.join("0001.png"), [0x89, b'P', b'N', b'G']).unwrap();
        std::fs::write(dir.join("notes.txt"), "ignored").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("0003.txt")).unwrap();
        let out = take_outputs(&root);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0].mime, "image/png");
        assert_eq!(out[0].data, STANDARD.encode([0x89, b'P', b'N', b'G']));
        assert_eq!(out[1].data, "second");
        std::fs::remove_dir_all(&root).unwrap();
    }
}

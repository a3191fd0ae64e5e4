//! Rich outputs, as a notebook gives them.
//!
//! Every template carries `python-wasi/guest/display.py` as the module `vivarium_display`;
//! a sandbox whose set-up asks for rich outputs (`GuestSetup::rich`) installs it in its hidden
//! set-up turn, making `display` a builtin and routing matplotlib's `plt.show()` to it.
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

/// Where the helper writes outputs, relative to the working directory (`/tmp/...` in the guest).
pub const OUTPUT_DIR: &str = "tmp/.vivarium/outputs";
/// At most this many outputs are returned (the helper stops at the same number).
pub const MAX_OUTPUTS: usize = 64;
/// The largest single output returned; a larger file is skipped.
pub const MAX_OUTPUT_BYTES: u64 = 8 << 20;
/// The most bytes of outputs returned in all.
pub const MAX_TOTAL_BYTES: u64 = 16 << 20;

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

//! A user template's state over its built-in one ([`Layer`]): the pages, globals and files a
//! template build left, laid onto a fresh instance of the built-in template before the
//! sandbox's own set-up turn runs, so every sandbox from it starts where the build ended
//! (its imports done, its files in place) and still gets its own environment and randomness.
//!
//! A layer is a [`SessionImage`] of a bare interpreter (no session hooks, no rich outputs:
//! those are each sandbox's set-up's: `Sandbox::into_bare_interpreter`), captured like a
//! session's and checked like any image when it is read back (`snapshot::decode`).

use wasmtime::Val;

use super::SandboxError;
use super::live::Live;
use super::workdir::WorkdirError;
use crate::hostcalls::charge::ENTRY_BYTES;
use crate::hostcalls::limiter::MemoryRefusal;
use crate::snapshot::{GlobalBits, GlobalValue, PAGE_BYTES, SessionImage, WASM_PAGE_BYTES};

/// A user template's state, ready to lay onto fresh instances of its built-in template.
#[derive(Debug)]
pub struct Layer {
    /// The template's content id (what names its file).
    pub id: String,
    image: SessionImage,
    /// When it was made: its files' modification time in every sandbox.
    made: std::time::SystemTime,
}

impl Layer {
    /// `image` as a layer named `id`, made `created_at` (seconds since the epoch). Its fit
    /// to the template is checked when laid.
    pub fn new(id: String, image: SessionImage, created_at: u64) -> Self {
        Layer {
            id,
            image,
            made: std::time::UNIX_EPOCH + std::time::Duration::from_secs(created_at),
        }
    }

    /// Lays the layer onto `live`, a fresh instance that has run nothing: its memory grown
    /// and written, its globals set, its folders and files made (a file the request itself
    /// placed at the same path wins). The caller's memory limit counts beyond the layer's
    /// memory, as beyond a built-in template's: the sandbox's limit is widened by what the
    /// layer's memory adds to the fresh instance's.
    pub(super) fn lay_onto(&self, live: &mut Live) -> Result<(), SandboxError> {
        let image = &self.image;
        let extra = image
            .memory_bytes
            .saturating_sub(live.memory.data_size(&live.store) as u64);
        live.limits.memory_bytes = live.limits.memory_bytes.saturating_add(extra);
        live.store.data_mut().limiter.widen(extra);
        write_memory(live, image.memory_bytes, &image.pages, &image.page_data)
            .and_then(|()| write_globals(live, &image.globals))
            .map_err(|e| match e {
                Unfit::HostBudget => SandboxError::HostBudget,
                Unfit::Mismatch(what) => {
                    SandboxError::Layer(format!("does not fit its base template: {what}"))
                }
            })?;
        // What the disk quota counts of what is laid, without walking the folder again: an
        // entry each, and each file in whole pages (never less than the quota's measure). A
        // kept folder (`kept_dirs`) holds them all already, as laid.
        let lay = !live.workdir.is_reused();
        let mut charged = live.store.data().fs.charged_bytes;
        for dir in &image.dirs {
            if lay {
                live.workdir.create_dir(dir)?;
            }
            charged = charged.saturating_add(ENTRY_BYTES);
        }
        for (path, content) in &image.files {
            if !lay || live.workdir.file_len(path).is_none() {
                if lay {
                    live.workdir.lay_file(path, content, self.made)?;
                }
                let pages = (content.len() as u64).div_ceil(PAGE_BYTES as u64);
                charged = charged.saturating_add(ENTRY_BYTES + pages * PAGE_BYTES as u64);
            }
        }
        for (path, target) in &image.links {
            if !lay || live.workdir.file_len(path).is_none() {
                if lay {
                    live.workdir.make_link(path, target)?;
                }
                charged = charged.saturating_add(ENTRY_BYTES);
            }
        }
        if charged > live.limits.disk_bytes {
            return Err(WorkdirError::InputsTooLarge {
                total: charged,
                limit: live.limits.disk_bytes,
            }
            .into());
        }
        let fs = &mut live.store.data_mut().fs;
        fs.charged_bytes = charged;
        // On tmpfs the files are memory, charged to the host's budget as input files are.
        if !fs.hold_on_host(charged, true) {
            return Err(SandboxError::HostBudget);
        }
        Ok(())
    }
}

/// Why an image's memory or globals do not fit the instance.
pub(super) enum Unfit {
    /// Growing the memory was refused by the host's budget.
    HostBudget,
    /// It does not fit the template (what does not).
    Mismatch(&'static str),
}

/// Grows `live`'s memory to `memory_bytes` and writes `pages` (each `PAGE_BYTES` of
/// `page_data`, in order) into it.
pub(super) fn write_memory(
    live: &mut Live,
    memory_bytes: u64,
    pages: &[u32],
    page_data: &[u8],
) -> Result<(), Unfit> {
    let Live { store, memory, .. } = live;
    let have = memory.data_size(&*store) as u64;
    if memory_bytes < have || !memory_bytes.is_multiple_of(WASM_PAGE_BYTES) {
        return Err(Unfit::Mismatch("memory size"));
    }
    let grow = (memory_bytes - have) / WASM_PAGE_BYTES;
    if grow > 0 {
        memory.grow(&mut *store, grow).map_err(|_| {
            if store.data().limiter.refused == Some(MemoryRefusal::HostBudget) {
                Unfit::HostBudget
            } else {
                Unfit::Mismatch("memory size (over the limit)")
            }
        })?;
    }
    let mem = memory.data_mut(&mut *store);
    for (i, page) in pages.iter().enumerate() {
        let at = *page as usize * PAGE_BYTES;
        let src = page_data
            .get(i * PAGE_BYTES..(i + 1) * PAGE_BYTES)
            .ok_or(Unfit::Mismatch("page data"))?;
        mem.get_mut(at..at + PAGE_BYTES)
            .ok_or(Unfit::Mismatch("page list"))?
            .copy_from_slice(src);
    }
    Ok(())
}

/// Sets `live`'s exported mutable globals to `globals`.
pub(super) fn write_globals(live: &mut Live, globals: &[GlobalValue]) -> Result<(), Unfit> {
    let Live {
        store, instance, ..
    } = live;
    for g in globals {
        let global = instance
            .get_global(&mut *store, &g.name)
            .ok_or(Unfit::Mismatch("globals"))?;
        let value = match g.value {
            GlobalBits::I32(v) => Val::I32(v as i32),
            GlobalBits::I64(v) => Val::I64(v as i64),
            GlobalBits::F32(v) => Val::F32(v),
            GlobalBits::F64(v) => Val::F64(v),
            GlobalBits::V128(v) => Val::V128(v.into()),
        };
        global
            .set(&mut *store, value)
            .map_err(|_| Unfit::Mismatch("globals"))?;
    }
    Ok(())
}

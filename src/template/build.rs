//! Building a template: instrument `python.wasm` with Wizer, run its init turns under the
//! sandbox's preopen table, snapshot memory and globals into a new module, and export its
//! mutable globals (`exports.rs`).

use std::fs::File;
use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::{Caller, Config, Engine, Instance, Linker, Module, OptLevel, Store, Val};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wizer::{InstanceState, SnapshotVal, ValType, Wizer};

use super::immortal::{self, Immortalized};
use super::{Template, TemplateError, build_err, io_err};
use crate::engine::{GUEST_THREAD_STACK_BYTES, WASM_STACK_BYTES};
use crate::guest::{self, ARGV0, HostDirs, STUB_DIRS, guest_env};
use crate::runtime::RuntimeFiles;
use crate::sync::lock;

/// Builds under an exclusive lock, so parallel processes build once; the file appears by
/// rename, so nobody reads half of it.
pub(super) fn build_locked(
    template: Template,
    files: &RuntimeFiles,
    dir: &Path,
    out: &Path,
    init: &[String; 2],
    keep_instrumented: bool,
) -> Result<(), TemplateError> {
    let out_dir = out.parent().expect("template path has a parent");
    std::fs::create_dir_all(out_dir).map_err(io_err("creating", out_dir))?;
    let lock_path = dir.join(format!(
        "{}.lock",
        out_dir.file_name().unwrap().to_string_lossy()
    ));
    let lock = File::create(&lock_path).map_err(io_err("creating", &lock_path))?;
    lock.lock().map_err(io_err("locking", &lock_path))?;
    if out.is_file() {
        return Ok(());
    }
    let started = Instant::now();
    eprintln!(
        "vivarium: building the {template} template from python.wasm (once per machine; \
         one to two minutes on 2 cores, then compiling it takes as long)"
    );
    let root = out_dir.join(format!("init-root-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    // Behind `guest::PACKAGES_DIR`: empty, as in a sandbox without packages.
    let packages = out_dir.join(format!("init-packages-{}", std::process::id()));
    std::fs::create_dir_all(&packages).map_err(io_err("creating", &packages))?;
    for stub in STUB_DIRS {
        std::fs::create_dir_all(root.join(stub)).map_err(io_err("creating", &root))?;
    }
    let wasm = std::fs::read(&files.plain_wasm).map_err(io_err("reading", &files.plain_wasm))?;
    let stdlib = files.stdlib_dir.clone();
    let mpl = files.mpl_data_dir.clone();
    let init = init.clone();
    let root2 = root.clone();
    let packages2 = packages.clone();
    // The init turn runs guest code: it needs the big native stack, like every guest call.
    let result = std::thread::Builder::new()
        .name("vivarium-template".into())
        .stack_size(GUEST_THREAD_STACK_BYTES)
        .spawn(move || {
            let dirs = HostDirs {
                stdlib: &stdlib,
                mpl_data: &mpl,
                root: &root2,
                packages: &packages2,
                packages_writable: false,
            };
            snapshot(&wasm, &dirs, &init, started, keep_instrumented)
        })
        .map_err(io_err("spawning a thread for", out))?
        .join()
        .map_err(|_| build_err(template, "the build thread panicked"))?;
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&packages);
    let bytes = result.map_err(|e| build_err(template, e))?;
    let tmp = out_dir.join(format!("template.wasm.tmp-{}", std::process::id()));
    std::fs::write(&tmp, &bytes).map_err(io_err("writing", &tmp))?;
    std::fs::rename(&tmp, out).map_err(io_err("renaming", out))?;
    eprintln!(
        "vivarium: {template} template snapshot written in {:.0} s ({} MB); compiling it next",
        started.elapsed().as_secs_f64(),
        bytes.len() >> 20
    );
    Ok(())
}

struct InitState {
    wasi: WasiP1Ctx,
    immortalized: Immortalized,
}

/// The compiled instrumented `python.wasm` (by the digest of the instrumented bytes), kept
/// between template builds of one process while another template is still to be built.
type Instrumented = Option<([u8; 32], Engine, Module)>;
static INSTRUMENTED: std::sync::Mutex<Instrumented> = std::sync::Mutex::new(None);

fn lock_instrumented() -> std::sync::MutexGuard<'static, Instrumented> {
    lock(&INSTRUMENTED)
}

/// Instrument, run the init, snapshot. Returns the new module's bytes.
fn snapshot(
    wasm: &[u8],
    dirs: &HostDirs<'_>,
    init: &[String; 2],
    started: Instant,
    keep_instrumented: bool,
) -> wasmtime::Result<Vec<u8>> {
    let mut wizer = Wizer::new();
    wizer.init_func("wizer.initialize");
    // Instrumenting is deterministic and quick; compiling its output is what takes long.
    let (cx, instrumented) = wizer.instrument(wasm)?;
    let digest: [u8; 32] = Sha256::digest(&instrumented).into();
    let (engine, module) = {
        let mut cached = lock_instrumented();
        let (engine, module) = match cached.take() {
            Some((d, engine, module)) if d == digest => (engine, module),
            _ => {
                let mut config = Config::new();
                config.wasm_exceptions(true);
                config.async_stack_size(WASM_STACK_BYTES);
                config.max_wasm_stack(WASM_STACK_BYTES);
                config.cranelift_opt_level(OptLevel::None);
                let engine = Engine::new(&config)?;
                let module = Module::new(&engine, &instrumented)?;
                (engine, module)
            }
        };
        if keep_instrumented {
            *cached = Some((digest, engine.clone(), module.clone()));
        }
        (engine, module)
    };
    drop(instrumented);
    eprintln!(
        "vivarium: compiled in {:.0} s; running the template's init (imports)",
        started.elapsed().as_secs_f64()
    );

    let stdout = MemoryOutputPipe::new(1 << 20);
    let stderr = MemoryOutputPipe::new(1 << 20);
    let mut b = WasiCtxBuilder::new();
    b.args(&[ARGV0])
        .envs(&guest_env(&[])?)
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_blocking_current_thread(true)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    // The table every sandbox gets (`guest::PREOPENS`): the snapshot keeps it.
    guest::preopen(&mut b, dirs)?;
    let mut store = Store::new(
        &engine,
        InitState {
            wasi: b.build_p1(),
            immortalized: Immortalized::default(),
        },
    );
    let mut linker: Linker<InitState> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |s: &mut InitState| &mut s.wasi)?;
    linker.func_wrap(
        "host",
        "call",
        |caller: Caller<'_, InitState>, req: i32, len: i32, out: i32, out_len: i32| -> i32 {
            immortal::host_call(caller, |s| &mut s.immortalized, (req, len, out, out_len))
        },
    )?;
    let instance = linker.instantiate(&mut store, &module)?;
    instance
        .get_typed_func::<(), ()>(&mut store, "_initialize")?
        .call(&mut store, ())?;
    instance
        .get_typed_func::<(), ()>(&mut store, "wizer.initialize")?
        .call(&mut store, ())?;
    let host_alloc = instance.get_typed_func::<i32, i32>(&mut store, "host_alloc")?;
    let turn = instance.get_typed_func::<(i32, i32), i32>(&mut store, "turn")?;
    let memory = instance
        .get_memory(&mut store, "memory")
        .ok_or_else(|| wasmtime::format_err!("no memory export"))?;
    // One turn after another: what the first frees, the second's fill covers.
    for src in init {
        let src = src.as_bytes();
        let p = host_alloc.call(&mut store, src.len() as i32)?;
        memory.write(&mut store, p as u32 as usize, src)?;
        let status = turn.call(&mut store, (p, src.len() as i32));
        let out = String::from_utf8_lossy(&stdout.contents()).into_owned();
        let err = String::from_utf8_lossy(&stderr.contents()).into_owned();
        match status {
            Ok(0) => {}
            Ok(v) => wasmtime::bail!("the init turn returned {v}\nstdout: {out}\nstderr: {err}"),
            Err(e) => {
                wasmtime::bail!("the init turn trapped: {e:#}\nstdout: {out}\nstderr: {err}")
            }
        }
    }
    let out = String::from_utf8_lossy(&stdout.contents()).into_owned();
    let err = String::from_utf8_lossy(&stderr.contents()).into_owned();
    let Immortalized { objects, skipped } = store.data().immortalized;
    if objects == 0 {
        wasmtime::bail!("the init turn made no object immortal\nstdout: {out}\nstderr: {err}");
    }
    eprintln!(
        "vivarium: init ran ({:.0} s so far; {objects} objects made immortal, {skipped} \
         addresses skipped); taking the snapshot",
        started.elapsed().as_secs_f64()
    );
    let snapshot = block_on(wizer.snapshot(
        &cx,
        &mut Snapshotting {
            store: &mut store,
            instance,
        },
    ))?;
    if super::exports::writes_tables(&snapshot)? {
        wasmtime::bail!(
            "the module's code writes its function table, which session snapshots leave out"
        );
    }
    super::exports::export_mutable_globals(&snapshot)
}

/// Wizer's view of our instance: exported globals and memory by name.
struct Snapshotting<'a> {
    store: &'a mut Store<InitState>,
    instance: Instance,
}

impl InstanceState for Snapshotting<'_> {
    async fn global_get(&mut self, name: &str, _: ValType) -> SnapshotVal {
        let global = self
            .instance
            .get_global(&mut *self.store, name)
            .expect("Wizer asks only for globals it exported");
        match global.get(&mut *self.store) {
            Val::I32(x) => SnapshotVal::I32(x),
            Val::I64(x) => SnapshotVal::I64(x),
            Val::F32(x) => SnapshotVal::F32(x),
            Val::F64(x) => SnapshotVal::F64(x),
            Val::V128(x) => SnapshotVal::V128(x.as_u128()),
            _ => panic!("unsupported global value type"),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        let memory = self
            .instance
            .get_memory(&mut *self.store, name)
            .expect("Wizer asks only for memories it exported");
        contents(memory.data(&*self.store))
    }
}

/// Wizer's snapshot API is async, but nothing in ours waits: poll to completion.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

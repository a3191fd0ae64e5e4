//! A worker process (`vivarium worker`, started by the supervisor, never by hand): it reads
//! its [`WorkerConfig`], makes its scratch root, jails itself, opens the runtime, says it is
//! ready, then does the jobs that come. Its main thread only reads the channel; each job
//! runs on a guest thread and writes its own events and reply. When the channel closes (the
//! supervisor went away) it exits at once.

use std::collections::HashMap;
use std::io::BufReader;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use super::jail::{self, JailReport};
use super::job::{Event, JobError};
use super::serve::{Events, Worker};
use super::wire::{self, FromWorker, JobId, ToWorker, WorkerConfig};
use crate::sandbox::workdir::ScratchRoot;
use crate::sync::lock;
use crate::vivarium::{Vivarium, VivariumOptions};

/// The descriptor the supervisor leaves the channel on.
pub const CHANNEL_FD: i32 = 3;

/// The descriptor of the shared memory budget's page, when there is one.
pub const BUDGET_FD: i32 = 4;

/// The largest frame the supervisor sends (a restored image at the largest limits).
const MAX_INBOUND: u64 = u32::MAX as u64;

/// The channel's write half, shared by the jobs.
type Out = Arc<Mutex<UnixStream>>;

fn send(out: &Out, msg: &FromWorker) -> bool {
    wire::write_frame(&mut *lock(out), msg).is_ok()
}

/// One job's events.
struct ChildEvents {
    id: JobId,
    out: Out,
    answers: Arc<Mutex<HashMap<JobId, Sender<String>>>>,
}

impl Events for ChildEvents {
    fn send(&self, event: Event) -> Option<std::sync::mpsc::Receiver<String>> {
        let rx = if event.is_question() {
            let (tx, rx) = std::sync::mpsc::channel();
            lock(&self.answers).insert(self.id, tx);
            Some(rx)
        } else {
            None
        };
        send(&self.out, &FromWorker::Event { id: self.id, event });
        rx
    }
}

/// Runs the worker on the channel at [`CHANNEL_FD`]; returns only when it cannot start
/// (the process then exits non-zero).
pub fn main() -> anyhow::Result<()> {
    // SAFETY: the supervisor put the channel's end at this descriptor for us alone, and
    // nothing else in this process has taken it.
    let stream = UnixStream::from(unsafe { OwnedFd::from_raw_fd(CHANNEL_FD) });
    let out: Out = Arc::new(Mutex::new(stream.try_clone()?));
    let mut input = BufReader::new(stream);
    let hello = wire::read_body(&mut input, 1 << 20)?
        .ok_or_else(|| anyhow::anyhow!("the supervisor closed the channel before its hello"))?;
    let ToWorker::Hello(config) = wire::parse::<ToWorker>(&hello)? else {
        anyhow::bail!("the supervisor's first frame was not its hello");
    };
    let (worker, report) = match start(&config) {
        Ok(v) => v,
        Err(e) => {
            send(&out, &FromWorker::Failed(format!("{e:#}")));
            return Err(e);
        }
    };
    send(&out, &FromWorker::Ready(report));
    serve(&worker, &mut input, &out);
    // The supervisor is gone: nothing this process holds is wanted (its scratch root is
    // removed by whoever comes next, or the supervisor).
    std::process::exit(0)
}

/// Scratch root, jail, runtime: in that order, so the jail is on before any thread but
/// this one exists, and every later thread inherits it.
fn start(config: &WorkerConfig) -> anyhow::Result<(Arc<Worker>, JailReport)> {
    let scratch = ScratchRoot::create(&config.scratch_base)?;
    let mut report = jail::before_open(&config.jail, scratch.path());
    let mut opts = VivariumOptions::from_env();
    opts.scratch_base = config.scratch_base.clone();
    opts.maximum = config.maximum;
    opts.budget = if config.shared_budget {
        // SAFETY: the supervisor put the budget's memfd at this descriptor for us alone.
        let fd = unsafe { OwnedFd::from_raw_fd(BUDGET_FD) };
        crate::budget::HostBudget::attach(config.budget_bytes, &fd)?
    } else {
        crate::budget::HostBudget::new(config.budget_bytes)
    };
    opts.engine.max_instances = config.max_instances;
    opts.packages.dir = config.package_dir.clone();
    opts.packages.source = crate::packages::PackageSource::Off;
    let host = Vivarium::open_in(opts, scratch)?;
    for t in &config.templates {
        host.template_pre(*t)?;
    }
    host.engine().forget_compiled_functions();
    // wasmtime-wasi runs some calls on a tokio runtime of its own, made on first use: made
    // now, while it may still make the socket pair tokio's signal driver wants.
    wasmtime_wasi::runtime::in_tokio(async {});
    jail::after_open(&config.jail, &mut report);
    Ok((Arc::new(Worker::new(host)), report))
}

/// Reads frames until the channel closes, dispatching each job to a guest thread.
fn serve(worker: &Arc<Worker>, input: &mut BufReader<UnixStream>, out: &Out) {
    let cancels: Arc<Mutex<HashMap<JobId, Arc<AtomicBool>>>> = Arc::default();
    let answers: Arc<Mutex<HashMap<JobId, Sender<String>>>> = Arc::default();
    loop {
        let msg = match wire::read_message::<ToWorker>(input, MAX_INBOUND) {
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => return,
        };
        match msg {
            #[cfg(debug_assertions)]
            ToWorker::Job {
                id,
                job: super::job::Job::Fault(super::fault::Fault::BreakProtocol),
            } => {
                // Lies, in the order a compromised worker might tell them.
                send(
                    out,
                    &FromWorker::Done {
                        id: id.wrapping_add(1_000_000),
                        result: Ok(super::job::Reply::Done),
                    },
                );
                send(
                    out,
                    &FromWorker::Done {
                        id,
                        result: Ok(super::job::Reply::Wrote(1)),
                    },
                );
                let _ = std::io::Write::write_all(&mut *lock(out), &u32::MAX.to_be_bytes());
            }
            ToWorker::Job { id, job } => {
                worker.arm(&job);
                let cancel = worker.cancel_flag();
                lock(&cancels).insert(id, cancel.clone());
                let events: Arc<dyn Events> = Arc::new(ChildEvents {
                    id,
                    out: out.clone(),
                    answers: answers.clone(),
                });
                let (worker, job_out, cancels, answers) = (
                    worker.clone(),
                    out.clone(),
                    cancels.clone(),
                    answers.clone(),
                );
                let spawned = crate::sandbox::guest_threads::spawn_deferring(move || {
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        worker.handle(job, cancel, events)
                    }))
                    .unwrap_or_else(|panic| {
                        let msg = crate::sandbox::guest_threads::panic_message(&*panic);
                        tracing::error!(panic = %msg, "guest thread panicked");
                        Err(JobError::Internal(format!(
                            "the guest thread panicked: {msg}"
                        )))
                    });
                    lock(&cancels).remove(&id);
                    lock(&answers).remove(&id);
                    send(&job_out, &FromWorker::Done { id, result });
                    // The reply has left: tear down what the job let go, then say what is left.
                    crate::sandbox::guest_threads::drop_deferred();
                    let pooled_instances = worker.pooled_instances();
                    send(&job_out, &FromWorker::Stats { pooled_instances });
                });
                if let Err(e) = spawned {
                    send(
                        out,
                        &FromWorker::Done {
                            id,
                            result: Err(JobError::Internal(format!(
                                "could not start a guest thread: {e}"
                            ))),
                        },
                    );
                }
            }
            ToWorker::Cancel { id } => {
                if let Some(flag) = lock(&cancels).get(&id) {
                    flag.store(true, Ordering::Relaxed);
                }
            }
            ToWorker::Interrupt { handle, generation } => worker.interrupt(handle, generation),
            ToWorker::Answer { id, line } => {
                if let Some(tx) = lock(&answers).remove(&id) {
                    let _ = tx.send(line);
                }
            }
            ToWorker::CancelAll => {
                worker.cancel_everything();
                for flag in lock(&cancels).values() {
                    flag.store(true, Ordering::Relaxed);
                }
            }
            // Only the first frame is a hello.
            ToWorker::Hello(_) => return,
        }
    }
}

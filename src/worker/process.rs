//! The supervisor's side of one worker process: starting it (its channel at descriptor 3,
//! a network namespace of its own when the jail is on; nothing kills it with the
//! supervisor: it exits once its channel closes), sending it jobs, reading what it sends as
//! hostile data, and noticing its death.
//!
//! A worker is trusted with nothing: a frame over the bound, a body that does not parse, a
//! reply for a job nobody sent or of the wrong kind, an event for a finished job: each ends
//! the worker (SIGKILL) exactly as if it had crashed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::jail::JailReport;
use super::job::{Event, Job, JobError, JobKind, Reply};
use super::wire::{self, FromWorker, JobId, ToWorker, WorkerConfig};
use super::{Failure, Sinks};
use crate::sandbox::output::StreamKind;
use crate::sync::lock;

/// How long a new worker may take to open its runtime and say it is ready.
const START_TIMEOUT: Duration = Duration::from_secs(300);

/// How a worker process ended.
#[derive(Debug, Clone)]
pub struct Death {
    /// The worker's index in the pool.
    pub index: usize,
    /// Its link's id.
    pub link: u64,
    /// Its pid.
    pub pid: u32,
    /// What ended it, in words (`killed by signal 9 (SIGKILL)`, `broke the protocol: ...`).
    pub cause: String,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Jobs that were in flight.
    pub in_flight: usize,
}

struct Pending {
    kind: JobKind,
    done: oneshot::Sender<Result<Reply, JobError>>,
    sinks: Sinks,
}

/// One live worker process.
pub struct Link {
    /// Unique for the supervisor's life (a replacement gets a new one).
    pub id: u64,
    /// Its process id.
    pub pid: u32,
    /// Its scratch root (`<base>/<pid>`), where it leaves the files it holds for us.
    root: std::path::PathBuf,
    /// What its jail holds.
    pub jail: JailReport,
    tx: mpsc::UnboundedSender<Vec<u8>>,
    pending: Mutex<HashMap<JobId, Pending>>,
    next: AtomicU64,
    alive: AtomicBool,
    in_flight: AtomicUsize,
    /// Sessions placed on it.
    pub sessions: AtomicUsize,
    /// Instances in its pool, as it last said.
    pub pooled: AtomicU64,
}

static LINK_IDS: AtomicU64 = AtomicU64::new(1);

impl Link {
    /// Starts worker `index` from `exe` with `config`; `died` is told once when it ends.
    pub async fn spawn(
        index: usize,
        exe: &Path,
        config: WorkerConfig,
        budget_fd: Option<Arc<std::os::fd::OwnedFd>>,
        max_frame: u64,
        died: impl FnOnce(Death) + Send + 'static,
    ) -> anyhow::Result<Arc<Link>> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        let scratch_base = config.scratch_base.clone();
        let mut cmd = tokio::process::Command::new(exe);
        cmd.arg("worker")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(false);
        let fd = std::os::fd::AsRawFd::as_raw_fd(&theirs);
        let budget = budget_fd
            .as_ref()
            .map(|f| std::os::fd::AsRawFd::as_raw_fd(&**f));
        let new_netns = config.jail.enabled;
        // SAFETY: between fork and exec only async-signal-safe calls (dup2, fcntl, unshare),
        // on descriptors this process owns. (No PR_SET_PDEATHSIG: it follows the thread
        // that forked, which may be a pool thread; a worker exits when its channel closes.)
        unsafe {
            cmd.pre_exec(move || {
                // Out of the way first: the budget's descriptor may be 3 itself.
                let budget = match budget {
                    Some(b) => {
                        let moved = libc::fcntl(b, libc::F_DUPFD_CLOEXEC, 10);
                        if moved < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Some(moved)
                    }
                    None => None,
                };
                if fd == super::child::CHANNEL_FD {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
                } else if libc::dup2(fd, super::child::CHANNEL_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // dup2 leaves the copy without close-on-exec. (fd 3 and 4 are free here: the
                // supervisor's own descriptors are all close-on-exec.)
                if let Some(b) = budget
                    && libc::dup2(b, super::child::BUDGET_FD) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                if new_netns {
                    // A network namespace of its own: no interface but a down loopback. Where
                    // the kernel refuses (no CAP_SYS_ADMIN), the worker reports it.
                    libc::unshare(libc::CLONE_NEWNET);
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        drop(theirs);
        let pid = child.id().unwrap_or(0);
        let root = scratch_base.join(pid.to_string());
        ours.set_nonblocking(true)?;
        let stream = tokio::net::UnixStream::from_std(ours)?;
        let (mut rd, mut wr) = stream.into_split();
        let hello = encode(&ToWorker::Hello(Box::new(config)))?;
        wr.write_all(&hello).await?;
        let ready = tokio::time::timeout(START_TIMEOUT, read_frame(&mut rd, 1 << 20)).await;
        let jail = match ready {
            Ok(Ok(Some(body))) => match wire::parse::<FromWorker>(&body)? {
                FromWorker::Ready(jail) => jail,
                FromWorker::Failed(why) => {
                    let _ = child.wait().await;
                    anyhow::bail!("worker {index} could not start: {why}");
                }
                _ => anyhow::bail!("worker {index} spoke out of turn before it was ready"),
            },
            Ok(Ok(None)) => {
                let status = child.wait().await?;
                anyhow::bail!("worker {index} exited before it was ready ({status})");
            }
            Ok(Err(e)) => anyhow::bail!("worker {index}: {e}"),
            Err(_) => {
                let _ = child.kill().await;
                anyhow::bail!("worker {index} was not ready within {START_TIMEOUT:?}");
            }
        };
        let (tx, mut outbox) = mpsc::unbounded_channel::<Vec<u8>>();
        let link = Arc::new(Link {
            id: LINK_IDS.fetch_add(1, Ordering::Relaxed),
            pid,
            root,
            jail,
            tx,
            pending: Mutex::default(),
            next: AtomicU64::new(1),
            alive: AtomicBool::new(true),
            in_flight: AtomicUsize::new(0),
            sessions: AtomicUsize::new(0),
            pooled: AtomicU64::new(0),
        });
        tokio::spawn(async move {
            while let Some(frame) = outbox.recv().await {
                if wr.write_all(&frame).await.is_err() {
                    break;
                }
            }
        });
        let reader = link.clone();
        tokio::spawn(async move {
            let broke = reader.read_all(&mut rd, max_frame).await;
            reader.alive.store(false, Ordering::Release);
            if broke.is_some() {
                let _ = child.start_kill();
            }
            let status = child.wait().await.ok();
            let in_flight = reader.fail_pending();
            let signal = status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s));
            let cause = match (&broke, status, signal) {
                (Some(why), _, _) => format!("broke the protocol: {why}"),
                (None, _, Some(sig)) => format!("killed by signal {sig} ({})", signal_name(sig)),
                (None, Some(s), None) => format!("exited ({s})"),
                (None, None, None) => "vanished".to_string(),
            };
            died(Death {
                index,
                link: reader.id,
                pid,
                cause,
                signal,
                in_flight,
            });
        });
        Ok(link)
    }

    /// Whether the process is still there.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Jobs in flight on it now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Sends a message that has no reply (cancel, interrupt, an answer).
    pub fn tell(&self, msg: &ToWorker) {
        if let Ok(frame) = encode(msg) {
            let _ = self.tx.send(frame);
        }
    }

    /// Does `job` on this worker, `sinks` seeing its events; a dropped call cancels it.
    pub async fn call(self: &Arc<Self>, job: Job, sinks: Sinks) -> Result<Reply, Failure> {
        if !self.is_alive() {
            return Err(Failure::Lost);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let kind = job.kind();
        let frame = encode(&ToWorker::Job { id, job })
            .map_err(|e| Failure::Job(JobError::Internal(e.to_string())))?;
        let (done, rx) = oneshot::channel();
        lock(&self.pending).insert(id, Pending { kind, done, sinks });
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        struct InFlight<'a> {
            link: &'a Link,
            id: JobId,
            finished: bool,
        }
        impl Drop for InFlight<'_> {
            fn drop(&mut self) {
                self.link.in_flight.fetch_sub(1, Ordering::AcqRel);
                if !self.finished {
                    // Its client went away: the worker stops it; its reply is read and dropped.
                    self.link.tell(&ToWorker::Cancel { id: self.id });
                }
            }
        }
        let mut guard = InFlight {
            link: self,
            id,
            finished: false,
        };
        if self.tx.send(frame).is_err() {
            guard.finished = true;
            lock(&self.pending).remove(&id);
            return Err(Failure::Lost);
        }
        let result = rx.await;
        guard.finished = true;
        match result {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(Failure::Job(e)),
            Err(_) => Err(Failure::Lost),
        }
    }

    /// Reads frames until the worker closes its end (`None`) or breaks the protocol (why).
    async fn read_all(&self, rd: &mut tokio::net::unix::OwnedReadHalf, max: u64) -> Option<String> {
        loop {
            let body = match read_frame(rd, max).await {
                Ok(Some(b)) => b,
                Ok(None) => return None,
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Some(e.to_string());
                }
                Err(_) => return None,
            };
            let parsed = if body.len() > 1 << 20 {
                tokio::task::spawn_blocking(move || wire::parse::<FromWorker>(&body))
                    .await
                    .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())))
            } else {
                wire::parse::<FromWorker>(&body)
            };
            let msg = match parsed {
                Ok(m) => m,
                Err(e) => return Some(format!("a frame that does not parse: {e}")),
            };
            if let Err(why) = self.take(msg) {
                return Some(why);
            }
        }
    }

    /// Takes one message from the worker, or says how it broke the protocol.
    fn take(&self, msg: FromWorker) -> Result<(), String> {
        match msg {
            FromWorker::Done { id, mut result } => {
                let Some(p) = lock(&self.pending).remove(&id) else {
                    return Err(format!("a reply to job {id}, which is not waiting for one"));
                };
                if let Ok(reply) = &mut result {
                    if !reply.answers(p.kind) {
                        return Err(format!("a reply of the wrong kind to a {:?} job", p.kind));
                    }
                    // Claimed whether or not anyone still waits: dropped, it frees its files.
                    super::held::claim(&self.root, reply)?;
                }
                let _ = p.done.send(result);
                Ok(())
            }
            FromWorker::Event { id, event } => {
                let pending = lock(&self.pending);
                let Some(p) = pending.get(&id) else {
                    return Err(format!("an event for job {id}, which is not running"));
                };
                match event {
                    Event::Output { stderr, bytes } => {
                        if let Some(observer) = &p.sinks.observer {
                            let kind = if stderr {
                                StreamKind::Stderr
                            } else {
                                StreamKind::Stdout
                            };
                            observer(kind, &bytes);
                        }
                    }
                    Event::Input { .. } | Event::ToolCalls { .. } | Event::Egress { .. } => {
                        let is_round = matches!(event, Event::ToolCalls { .. });
                        let rx = match event {
                            Event::Input { prompt } => p.sinks.asker.as_ref().map(|a| a(prompt)),
                            Event::ToolCalls { calls } => p.sinks.tools.as_ref().map(|a| a(calls)),
                            Event::Egress { request } => {
                                p.sinks.egress.as_ref().map(|a| a(*request))
                            }
                            Event::Output { .. } => None,
                        };
                        // A round of tool calls gives the run's slot back while it waits.
                        let parking = match is_round {
                            true => p.sinks.parking.clone(),
                            false => None,
                        };
                        if let Some(rx) = rx {
                            if let Some(parking) = &parking {
                                parking.park();
                            }
                            let tx = self.tx.clone();
                            tokio::task::spawn_blocking(move || {
                                // The asker's side goes away when the turn ends; a round
                                // the supervisor will not answer (a leak under `deny`, a
                                // replay gone astray) ends the run.
                                let Ok(line) = rx.recv() else {
                                    if is_round && let Ok(frame) = encode(&ToWorker::Cancel { id })
                                    {
                                        let _ = tx.send(frame);
                                    }
                                    return;
                                };
                                if let Some(parking) = parking {
                                    tokio::runtime::Handle::current().block_on(parking.unpark());
                                }
                                if let Ok(frame) = encode(&ToWorker::Answer { id, line }) {
                                    let _ = tx.send(frame);
                                }
                            });
                        }
                    }
                }
                Ok(())
            }
            FromWorker::Stats { pooled_instances } => {
                self.pooled.store(pooled_instances, Ordering::Relaxed);
                Ok(())
            }
            FromWorker::Ready(_) | FromWorker::Failed(_) => {
                Err("a start-up message after it started".into())
            }
        }
    }

    /// Fails every job in flight (the worker is gone); how many there were.
    fn fail_pending(&self) -> usize {
        let pending: Vec<Pending> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        pending.len()
    }
}

/// `msg` as a frame.
fn encode(msg: &ToWorker) -> std::io::Result<Vec<u8>> {
    let mut frame = Vec::new();
    wire::write_frame(&mut frame, msg)?;
    Ok(frame)
}

async fn read_frame(
    rd: &mut (impl AsyncReadExt + Unpin),
    max: u64,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match rd.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as u64;
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes, over the bound of {max}"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    rd.read_exact(&mut body).await?;
    Ok(Some(body))
}

/// A signal's name, for the log and the metrics.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGSYS => "SIGSYS",
        libc::SIGBUS => "SIGBUS",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGILL => "SIGILL",
        _ => "another signal",
    }
}

//! Execution slots shared fairly between tenants.
//!
//! `slots` runs at once, and a queue of at most `queue_depth` waiting: one FIFO per tenant,
//! served so that one tenant's backlog delays another by at most about one run:
//!
//! - a freed slot goes to the waiting tenant with the fewest runs going, ties in turn
//!   (round robin), so tenants' shares of the slots even out;
//! - a tenant with nothing running does not wait behind others' runs at all: it starts at
//!   once on one of `burst` extra slots (the kernel then shares the cores between its run
//!   and theirs), so a hello world is not queued behind someone's five-second jobs.
//!
//! Every grant happens under one lock, and a waiter that gives up (timeout, or its request
//! dropped) takes itself out under the same lock, or gives back a slot it was granted in
//! the meantime: a slot is never lost.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::oneshot;

use crate::sync::lock;

/// Why no slot was had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoSlot {
    /// The queue was full.
    QueueFull,
    /// None came free before the deadline.
    Timeout,
    /// Shutting down.
    Closed,
}

pub struct FairSlots {
    state: Mutex<State>,
    slots: usize,
    burst: usize,
    queue_depth: usize,
}

#[derive(Default)]
struct State {
    running: usize,
    /// Runs going, per tenant with any.
    by_tenant: HashMap<String, usize>,
    /// Waiters per tenant with any, oldest first.
    waiting: HashMap<String, VecDeque<Waiter>>,
    /// Tenants with waiters, in the order they are next served.
    turn: VecDeque<String>,
    queued: usize,
    next_id: u64,
    closed: bool,
}

struct Waiter {
    id: u64,
    grant: oneshot::Sender<()>,
}

/// A slot, given back when dropped.
pub struct Slot {
    slots: Arc<FairSlots>,
    tenant: String,
}

impl Slot {
    /// Gives the slot back while its run waits on something outside the host (a code-mode
    /// round of tool calls): what takes one again for the same tenant.
    pub fn park(self) -> Parked {
        Parked {
            slots: self.slots.clone(),
            tenant: self.tenant.clone(),
        }
    }
}

/// A slot given back by [`Slot::park`].
pub struct Parked {
    slots: Arc<FairSlots>,
    tenant: String,
}

impl Parked {
    /// A slot again, queued fairly like any run of the tenant's, waiting until `deadline`.
    pub async fn unpark(self, deadline: Instant) -> Result<Slot, NoSlot> {
        self.slots.acquire(&self.tenant, deadline).await
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut st = lock(&self.slots.state);
        st.release(&self.tenant);
        self.slots.dispatch(&mut st);
    }
}

impl State {
    fn running_of(&self, tenant: &str) -> usize {
        self.by_tenant.get(tenant).copied().unwrap_or(0)
    }

    fn start(&mut self, tenant: &str) {
        self.running += 1;
        *self.by_tenant.entry(tenant.to_string()).or_default() += 1;
    }

    fn release(&mut self, tenant: &str) {
        self.running -= 1;
        if let Some(n) = self.by_tenant.get_mut(tenant) {
            *n -= 1;
            if *n == 0 {
                self.by_tenant.remove(tenant);
            }
        }
    }

    /// Takes waiter `id` of `tenant` out of the queue; whether it was still there.
    fn withdraw(&mut self, tenant: &str, id: u64) -> bool {
        let Some(q) = self.waiting.get_mut(tenant) else {
            return false;
        };
        let Some(at) = q.iter().position(|w| w.id == id) else {
            return false;
        };
        q.remove(at);
        self.queued -= 1;
        if q.is_empty() {
            self.waiting.remove(tenant);
            self.turn.retain(|t| t != tenant);
        }
        true
    }
}

impl FairSlots {
    pub fn new(slots: usize, burst: usize, queue_depth: usize) -> Arc<Self> {
        Arc::new(FairSlots {
            state: Mutex::new(State::default()),
            slots,
            burst,
            queue_depth,
        })
    }

    /// Runs going now (the burst slots included).
    pub fn running(&self) -> usize {
        lock(&self.state).running
    }

    /// Requests waiting now.
    pub fn queued(&self) -> usize {
        lock(&self.state).queued
    }

    /// Whether `tenant` may start now, with no one ahead of it.
    fn may_start(&self, st: &State, tenant: &str) -> bool {
        (st.running < self.slots && st.queued == 0)
            || (st.running_of(tenant) == 0 && st.running < self.slots + self.burst)
    }

    /// A slot for `tenant`, waiting until `deadline` at most.
    pub async fn acquire(
        self: &Arc<Self>,
        tenant: &str,
        deadline: Instant,
    ) -> Result<Slot, NoSlot> {
        let (id, rx) = {
            let mut st = lock(&self.state);
            if st.closed {
                return Err(NoSlot::Closed);
            }
            if self.may_start(&st, tenant) {
                st.start(tenant);
                return Ok(self.slot(tenant));
            }
            if st.queued >= self.queue_depth {
                return Err(NoSlot::QueueFull);
            }
            let (tx, rx) = oneshot::channel();
            st.next_id += 1;
            let id = st.next_id;
            st.queued += 1;
            let q = st.waiting.entry(tenant.to_string()).or_default();
            q.push_back(Waiter { id, grant: tx });
            if q.len() == 1 {
                st.turn.push_back(tenant.to_string());
            }
            (id, rx)
        };
        let mut wait = Wait {
            slots: self,
            tenant,
            id,
            rx: Some(rx),
        };
        let got = tokio::time::timeout_at(deadline.into(), wait.rx.as_mut().unwrap()).await;
        match got {
            Ok(Ok(())) => {
                wait.rx = None;
                Ok(self.slot(tenant))
            }
            Ok(Err(_)) => {
                wait.rx = None;
                Err(NoSlot::Closed)
            }
            Err(_) => {
                // Granted just now, or still queued: `Wait`'s drop settles it under the lock.
                let mut st = lock(&self.state);
                if st.withdraw(tenant, id) {
                    wait.rx = None;
                    return Err(NoSlot::Timeout);
                }
                let granted = wait.rx.take().is_some_and(|mut rx| rx.try_recv().is_ok());
                drop(st);
                if granted {
                    Ok(self.slot(tenant))
                } else {
                    Err(NoSlot::Closed)
                }
            }
        }
    }

    fn slot(self: &Arc<Self>, tenant: &str) -> Slot {
        Slot {
            slots: self.clone(),
            tenant: tenant.to_string(),
        }
    }

    /// Grants slots to waiters while there are slots for them.
    fn dispatch(&self, st: &mut State) {
        loop {
            // A waiting tenant with nothing running starts on a burst slot at once.
            let idle = st
                .turn
                .iter()
                .position(|t| st.running_of(t) == 0 && st.running < self.slots + self.burst);
            let pick = match idle {
                Some(at) => Some(at),
                None if st.running < self.slots => st
                    .turn
                    .iter()
                    .enumerate()
                    .min_by_key(|(i, t)| (st.running_of(t), *i))
                    .map(|(i, _)| i),
                None => None,
            };
            let Some(at) = pick else {
                return;
            };
            let tenant = st.turn.remove(at).expect("a tenant in turn");
            let q = st
                .waiting
                .get_mut(&tenant)
                .expect("waiters of a tenant in turn");
            let w = q.pop_front().expect("a waiter");
            let more = !q.is_empty();
            if more {
                st.turn.push_back(tenant.clone());
            } else {
                st.waiting.remove(&tenant);
            }
            st.queued -= 1;
            st.start(&tenant);
            if w.grant.send(()).is_err() {
                // Its request was dropped meanwhile.
                st.release(&tenant);
            }
        }
    }

    /// Refuses every later request and wakes every waiting one.
    pub fn close(&self) {
        let mut st = lock(&self.state);
        st.closed = true;
        st.waiting.clear();
        st.turn.clear();
        st.queued = 0;
    }
}

/// A queued request: dropped before its grant was seen, it gives back what it was granted.
struct Wait<'a> {
    slots: &'a Arc<FairSlots>,
    tenant: &'a str,
    id: u64,
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        let mut st = lock(&self.slots.state);
        if st.withdraw(self.tenant, self.id) {
            return;
        }
        if rx.try_recv().is_ok() {
            st.release(self.tenant);
            self.slots.dispatch(&mut st);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[tokio::test]
    async fn an_idle_tenant_starts_on_a_burst_slot_past_a_backlog() {
        let s = FairSlots::new(2, 2, 64);
        let a1 = s.acquire("a", soon()).await.unwrap();
        let a2 = s.acquire("a", soon()).await.unwrap();
        // a's third waits...
        let s2 = s.clone();
        let a3 = tokio::spawn(async move { s2.acquire("a", soon()).await.map(drop) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(s.queued(), 1);
        // ...but b, with nothing running, starts now.
        let b = s.acquire("b", soon()).await.unwrap();
        assert_eq!(s.running(), 3);
        // b's second one waits, and is served before a's third (b has fewer running).
        drop(b);
        let s3 = s.clone();
        let b2 = tokio::spawn(async move {
            let slot = s3.acquire("b", soon()).await;
            slot.map(drop)
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(a1);
        drop(a2);
        assert!(b2.await.unwrap().is_ok());
        assert!(a3.await.unwrap().is_ok());
        assert_eq!(s.running(), 0);
        assert_eq!(s.queued(), 0);
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_tenant_with_fewest_running() {
        let s = FairSlots::new(2, 0, 64);
        let a1 = s.acquire("a", soon()).await.unwrap();
        let b1 = s.acquire("b", soon()).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for t in ["a", "a", "a", "b"] {
            let (s, order) = (s.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let slot = s.acquire(t, soon()).await.unwrap();
                lock(&order).push(t);
                tokio::time::sleep(Duration::from_millis(50)).await;
                drop(slot);
            }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Both free their slots: a's next goes first (a has none running, b one), then b's
        // (b has none, a one), though a queued three before b's one.
        drop(a1);
        drop(b1);
        for t in tasks {
            t.await.unwrap();
        }
        let order = lock(&order).clone();
        assert_eq!(order.len(), 4);
        // b's one waiter is not left for last behind a's three.
        assert!(
            order.iter().position(|t| *t == "b").unwrap() < 3,
            "{order:?}"
        );
    }

    #[tokio::test]
    async fn timeouts_and_dropped_waiters_lose_no_slot() {
        let s = FairSlots::new(1, 0, 64);
        let held = s.acquire("a", soon()).await.unwrap();
        let r = s
            .acquire("b", Instant::now() + Duration::from_millis(30))
            .await;
        assert_eq!(r.err(), Some(NoSlot::Timeout));
        let s2 = s.clone();
        let dropped = tokio::spawn(async move { s2.acquire("c", soon()).await.map(drop) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        dropped.abort();
        let _ = dropped.await;
        drop(held);
        assert_eq!(s.running(), 0);
        assert_eq!(s.queued(), 0);
        let _again = s.acquire("d", soon()).await.unwrap();
    }

    #[tokio::test]
    async fn the_queue_is_bounded() {
        let s = FairSlots::new(1, 0, 1);
        let _held = s.acquire("a", soon()).await.unwrap();
        let s2 = s.clone();
        let _w = tokio::spawn(async move { s2.acquire("a", soon()).await.map(drop) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(s.acquire("b", soon()).await.err(), Some(NoSlot::QueueFull));
    }
}

//! What a session has used: totals over its turns and one sample a turn, kept with the
//! session (and with its hibernated entry while it sleeps), read by `GET
//! /v1/sessions/{id}/metrics` and E2B's sandbox metrics.
//!
//! A sandbox runs one guest thread and nothing between turns, so a turn's wall time is its
//! CPU time, and a sample's CPU share is the turn's time over the time since the sample
//! before it. Linear memory never shrinks: the memory "now" is the last turn's peak.
//! The series lives in the supervisor's memory: a restart (or a failover) starts it again,
//! with the turn count the session's snapshot keeps.

use std::collections::VecDeque;
use std::time::SystemTime;

use serde::Serialize;
use utoipa::ToSchema;

use crate::report::{NetworkUsage, Usage as RunUsage};
use crate::supervisor::time::{rfc3339, unix_secs};

/// Samples kept a session, newest last; older ones are dropped (the totals keep counting).
pub const MAX_SAMPLES: usize = 120;

/// A session's usage as the supervisor accumulates it.
#[derive(Debug, Clone)]
pub struct Usage {
    cpu_seconds: f64,
    fuel: u64,
    memory_bytes: u64,
    memory_peak_bytes: u64,
    disk_bytes: u64,
    egress: EgressTotals,
    samples: VecDeque<UsageSample>,
    /// When the newest sample (or the session) was made: a sample's CPU share is over the
    /// time since.
    since: SystemTime,
}

impl Usage {
    /// A session's usage at its start: `memory_bytes` of linear memory, nothing run.
    pub fn new(memory_bytes: u64, now: SystemTime) -> Usage {
        Usage {
            cpu_seconds: 0.0,
            fuel: 0,
            memory_bytes,
            memory_peak_bytes: memory_bytes,
            disk_bytes: 0,
            egress: EgressTotals::default(),
            samples: VecDeque::new(),
            since: now,
        }
    }

    /// Counts a turn that ended at `now` having used `run` (and made `network`'s requests).
    pub fn note_turn(&mut self, run: &RunUsage, network: Option<&NetworkUsage>, now: SystemTime) {
        let seconds = run.wall_ms / 1000.0;
        self.cpu_seconds += seconds;
        self.fuel = self.fuel.saturating_add(run.fuel);
        self.memory_bytes = run.memory_peak_bytes;
        self.memory_peak_bytes = self.memory_peak_bytes.max(run.memory_peak_bytes);
        self.disk_bytes = run.disk_bytes;
        if let Some(n) = network {
            self.egress.requests += u64::from(n.requests);
            self.egress.bytes_sent = self.egress.bytes_sent.saturating_add(n.bytes_sent);
            self.egress.bytes_received =
                self.egress.bytes_received.saturating_add(n.bytes_received);
        }
        let interval = now
            .duration_since(self.since)
            .unwrap_or_default()
            .as_secs_f64();
        if self.samples.len() == MAX_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(UsageSample {
            at: rfc3339(now),
            at_unix: unix_secs(now),
            cpu_used_pct: cpu_share(seconds, interval),
            memory_bytes: self.memory_bytes,
            disk_bytes: self.disk_bytes,
        });
        self.since = now;
    }

    /// What it says of itself at `now` (`turns`, the limits: the session's).
    pub fn metrics(
        &self,
        session_id: &str,
        turns: u64,
        memory_limit_bytes: u64,
        disk_limit_bytes: u64,
        now: SystemTime,
    ) -> SessionMetrics {
        SessionMetrics {
            session_id: session_id.to_string(),
            at: rfc3339(now),
            turns,
            cpu_seconds: self.cpu_seconds,
            fuel: self.fuel,
            memory_bytes: self.memory_bytes,
            memory_peak_bytes: self.memory_peak_bytes,
            memory_limit_bytes,
            disk_bytes: self.disk_bytes,
            disk_limit_bytes,
            egress: self.egress.clone(),
            samples: self.samples.iter().cloned().collect(),
        }
    }
}

/// A turn's time over the interval it fell in, as a percentage of one CPU (at most 100).
fn cpu_share(seconds: f64, interval: f64) -> f64 {
    if interval <= 0.0 {
        return if seconds > 0.0 { 100.0 } else { 0.0 };
    }
    (seconds / interval * 100.0).clamp(0.0, 100.0)
}

/// `GET /v1/sessions/{id}/metrics`: what a session has used, in total and turn by turn.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionMetrics {
    pub session_id: String,
    /// When these figures were read (RFC 3339).
    pub at: String,
    /// Turns it completed.
    pub turns: u64,
    /// Seconds its turns ran: a sandbox runs one guest thread and nothing between turns, so
    /// this is its CPU time (kept since it was opened or last brought back on this server).
    pub cpu_seconds: f64,
    /// Fuel its turns burnt.
    pub fuel: u64,
    /// Its linear memory now (as of its last turn: WebAssembly memory does not shrink).
    pub memory_bytes: u64,
    /// The most its linear memory has been.
    pub memory_peak_bytes: u64,
    /// `limits.memory_bytes`: what it may use beyond its template's own image.
    pub memory_limit_bytes: u64,
    /// Bytes its working directory held after its last turn.
    pub disk_bytes: u64,
    /// `limits.disk_bytes`.
    pub disk_limit_bytes: u64,
    /// Its turns' outbound requests.
    pub egress: EgressTotals,
    /// One sample a turn, oldest first: the newest 120.
    pub samples: Vec<UsageSample>,
}

/// Outbound requests over a session's turns.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct EgressTotals {
    /// Requests made, refused ones included.
    pub requests: u64,
    /// Bytes that left (targets, headers and bodies).
    pub bytes_sent: u64,
    /// Bytes of the response bodies received.
    pub bytes_received: u64,
}

/// A session's usage as one turn left it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UsageSample {
    /// When the turn ended (RFC 3339).
    pub at: String,
    /// The same, in seconds since the Unix epoch.
    pub at_unix: u64,
    /// The turn's time over the time since the sample before it (or the opening), in
    /// percent of one CPU.
    pub cpu_used_pct: f64,
    /// Linear memory after the turn.
    pub memory_bytes: u64,
    /// Working-directory bytes after the turn.
    pub disk_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn run(wall_ms: f64, memory: u64, disk: u64) -> RunUsage {
        RunUsage {
            wall_ms,
            fuel: 1000,
            memory_peak_bytes: memory,
            disk_bytes: disk,
        }
    }

    #[test]
    fn turns_add_up_and_each_leaves_a_sample_with_its_share_of_the_time_since_the_last() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut u = Usage::new(50 << 20, t0);
        // 0.5 s of a 2 s interval: 25 %.
        u.note_turn(
            &run(500.0, 60 << 20, 4096),
            None,
            t0 + Duration::from_secs(2),
        );
        let net = NetworkUsage {
            requests: 2,
            bytes_sent: 300,
            bytes_received: 7000,
            ..Default::default()
        };
        u.note_turn(
            &run(100.0, 55 << 20, 0),
            Some(&net),
            t0 + Duration::from_secs(3),
        );
        let m = u.metrics("s-1", 2, 512 << 20, 100 << 20, t0 + Duration::from_secs(4));
        assert_eq!(m.turns, 2);
        assert!((m.cpu_seconds - 0.6).abs() < 1e-9, "{}", m.cpu_seconds);
        assert_eq!(m.fuel, 2000);
        assert_eq!((m.memory_bytes, m.memory_peak_bytes), (55 << 20, 60 << 20));
        assert_eq!(m.disk_bytes, 0);
        assert_eq!((m.egress.requests, m.egress.bytes_received), (2, 7000));
        let pct: Vec<f64> = m.samples.iter().map(|s| s.cpu_used_pct).collect();
        assert!(
            (pct[0] - 25.0).abs() < 1e-9 && (pct[1] - 10.0).abs() < 1e-9,
            "{pct:?}"
        );
        assert_eq!(m.samples[0].at_unix, 1_000_002);
        assert_eq!(m.samples[1].memory_bytes, 55 << 20);
    }

    #[test]
    fn samples_are_bounded_and_the_totals_keep_counting() {
        let t0 = SystemTime::UNIX_EPOCH;
        let mut u = Usage::new(0, t0);
        for i in 1..=(MAX_SAMPLES as u64 + 30) {
            u.note_turn(&run(1.0, i, 0), None, t0 + Duration::from_secs(i));
        }
        let m = u.metrics("s", 150, 0, 0, t0);
        assert_eq!(m.samples.len(), MAX_SAMPLES);
        assert_eq!(m.samples[0].memory_bytes, 31);
        assert_eq!(m.fuel, 150 * 1000);
        assert_eq!(cpu_share(2.0, 0.0), 100.0);
    }
}

//! What the E2B door keeps of its sandboxes beside their sessions: the template id and
//! metadata they were created with, and the extra contexts (sessions) of each. In memory:
//! a sandbox back after a restart is still its session, with its template's name and no
//! metadata or contexts. Bounded: one entry per live session opened here (the sessions'
//! own quotas bound them), [`MAX_CONTEXTS`] contexts each; entries whose session is gone
//! are dropped as they are met.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use crate::sync::lock;

/// Contexts one sandbox may have besides its own.
pub const MAX_CONTEXTS: usize = 16;
/// Metadata entries one sandbox may carry, and the bytes of each key and value.
pub const MAX_METADATA: usize = 64;
pub const MAX_METADATA_BYTES: usize = 1024;

/// One sandbox's record.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// The `templateID` it was created with.
    pub template_id: String,
    pub metadata: BTreeMap<String, String>,
    /// Its `envVars`, set again when its interpreter restarts.
    pub env: BTreeMap<String, String>,
    /// Session ids of its extra code contexts, oldest first.
    pub contexts: Vec<String>,
    /// Those of its contexts made for bash (`language: "bash"`): their cells are shell.
    pub bash_contexts: Vec<String>,
}

/// Records kept before the first sweep of those whose session is gone.
const FIRST_SWEEP: usize = 1024;

/// Every sandbox the door created, by session id, and the session ids of their contexts.
#[derive(Default)]
struct Map {
    by_id: HashMap<String, Record>,
    /// Every record's `contexts` (sessions, but not sandboxes: a list leaves them out).
    contexts: HashSet<String>,
}

impl Map {
    fn forget(&mut self, id: &str) -> Option<Record> {
        let record = self.by_id.remove(id)?;
        for c in &record.contexts {
            self.contexts.remove(c);
        }
        Some(record)
    }
}

pub struct Sandboxes {
    map: Mutex<Map>,
    /// The count at which the next insert sweeps: twice what the last sweep kept, so a
    /// sweep's cost is spread over as many inserts.
    next_sweep: Mutex<usize>,
}

impl Default for Sandboxes {
    fn default() -> Self {
        Sandboxes {
            map: Mutex::default(),
            next_sweep: Mutex::new(FIRST_SWEEP),
        }
    }
}

impl Sandboxes {
    /// Keeps `record` for sandbox `id`; now and then forgets the records of sessions that
    /// are gone (expired, closed elsewhere), as `alive` says.
    pub fn insert(&self, id: &str, record: Record, alive: impl Fn(&str) -> bool) {
        let mut map = lock(&self.map);
        map.forget(id);
        map.contexts.extend(record.contexts.iter().cloned());
        map.by_id.insert(id.to_string(), record);
        let mut next = lock(&self.next_sweep);
        if map.by_id.len() >= *next {
            let gone: Vec<String> = map.by_id.keys().filter(|id| !alive(id)).cloned().collect();
            for id in gone {
                map.forget(&id);
            }
            *next = (map.by_id.len() * 2).max(FIRST_SWEEP);
        }
    }

    pub fn get(&self, id: &str) -> Option<Record> {
        lock(&self.map).by_id.get(id).cloned()
    }

    /// Sandbox `id`'s contexts (none when the door has no record of it).
    pub fn contexts(&self, id: &str) -> Vec<String> {
        lock(&self.map)
            .by_id
            .get(id)
            .map(|r| r.contexts.clone())
            .unwrap_or_default()
    }

    /// Forgets sandbox `id`; returns its record (its contexts to close).
    pub fn remove(&self, id: &str) -> Option<Record> {
        lock(&self.map).forget(id)
    }

    /// Whether session `id` is some sandbox's context rather than a sandbox.
    pub fn is_context(&self, id: &str) -> bool {
        lock(&self.map).contexts.contains(id)
    }

    /// Adds context `context` to sandbox `id` (a bash one when `bash`); `false` when it has
    /// [`MAX_CONTEXTS`].
    pub fn add_context(&self, id: &str, context: &str, bash: bool) -> bool {
        let mut guard = lock(&self.map);
        let map = &mut *guard;
        let record = map.by_id.entry(id.to_string()).or_default();
        if record.contexts.len() >= MAX_CONTEXTS {
            return false;
        }
        record.contexts.push(context.to_string());
        if bash {
            record.bash_contexts.push(context.to_string());
        }
        map.contexts.insert(context.to_string());
        true
    }

    /// Whether `context` is one of sandbox `id`'s contexts.
    pub fn has_context(&self, id: &str, context: &str) -> bool {
        lock(&self.map)
            .by_id
            .get(id)
            .is_some_and(|r| r.contexts.iter().any(|c| c == context))
    }

    /// Whether `context`, one of sandbox `id`'s contexts, was made for bash.
    pub fn is_bash(&self, id: &str, context: &str) -> bool {
        lock(&self.map)
            .by_id
            .get(id)
            .is_some_and(|r| r.bash_contexts.iter().any(|c| c == context))
    }

    pub fn remove_context(&self, id: &str, context: &str) {
        let mut guard = lock(&self.map);
        let map = &mut *guard;
        if let Some(r) = map.by_id.get_mut(id) {
            r.contexts.retain(|c| c != context);
            r.bash_contexts.retain(|c| c != context);
            map.contexts.remove(context);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_sessions_that_are_gone_are_swept() {
        let s = Sandboxes::default();
        for i in 0..FIRST_SWEEP {
            let record = Record {
                contexts: vec![format!("c-{i}")],
                ..Record::default()
            };
            s.insert(&format!("s-{i}"), record, |id| id == "s-7");
        }
        let kept = lock(&s.map).by_id.len();
        assert_eq!(kept, 1, "only the live one is kept");
        assert!(s.get("s-7").is_some() && s.get("s-8").is_none());
        // Their contexts go with them.
        assert!(s.is_context("c-7") && !s.is_context("c-8"));
        assert_eq!(lock(&s.map).contexts.len(), 1);
        // The next sweep waits until the map holds FIRST_SWEEP again.
        assert_eq!(*lock(&s.next_sweep), FIRST_SWEEP);
    }
}

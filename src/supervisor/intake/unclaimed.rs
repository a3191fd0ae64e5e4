//! Sessions a request opened but has not yet handed to its caller (a session being set up,
//! forks not yet answered): closed, in the background, when the request is dropped (a client
//! hanging up, a panic) before [`Unclaimed::claim`], so nothing half-made is left running.

use std::sync::Arc;

use crate::supervisor::Runner;

pub struct Unclaimed {
    runner: Arc<Runner>,
    key: Option<String>,
    ids: Vec<String>,
}

impl Unclaimed {
    /// None yet, for the owner `key`.
    pub fn new(runner: &Arc<Runner>, key: Option<&str>) -> Self {
        Unclaimed {
            runner: runner.clone(),
            key: key.map(str::to_string),
            ids: Vec::new(),
        }
    }

    /// Session `id`, just opened, is this request's to hand over or close.
    pub fn push(&mut self, id: &str) {
        self.ids.push(id.to_string());
    }

    /// Every session is the caller's now (or closed by the caller itself): none is closed.
    pub fn claim(mut self) {
        self.ids.clear();
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        let ids = std::mem::take(&mut self.ids);
        if ids.is_empty() {
            return;
        }
        // Drop cannot wait: the closes run on their own (the request's runtime is there).
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (runner, key) = (self.runner.clone(), self.key.take());
        rt.spawn(async move {
            for id in ids {
                let _ = runner.close_session(&id, key.as_deref()).await;
            }
        });
    }
}

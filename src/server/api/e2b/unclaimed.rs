//! Sessions a request opened but has not yet handed to its caller (forks not yet
//! answered): closed when the request is dropped (a client hanging up, a panic) before
//! [`Unclaimed::claim`], so a fork that fails half-way leaves nothing running. (A sandbox
//! or a context is opened, labelled and set up in one supervisor call, `intake::open_with`,
//! which closes what it opened when the set-up fails.)

use super::DoorState;

pub struct Unclaimed {
    door: DoorState,
    key: Option<String>,
    ids: Vec<String>,
}

impl Unclaimed {
    pub fn new(door: &DoorState, key: Option<&str>) -> Self {
        Unclaimed {
            door: door.clone(),
            key: key.map(str::to_string),
            ids: Vec::new(),
        }
    }

    /// Session `id`, just opened, is this request's to hand over or close.
    pub fn push(&mut self, id: &str) {
        self.ids.push(id.to_string());
    }

    /// Every session is the caller's now: none is closed.
    pub fn claim(mut self) {
        self.ids.clear();
    }
}

async fn close_all(door: &DoorState, key: Option<&str>, ids: Vec<String>) {
    for id in ids {
        let _ = door.app.runner.close_session(&id, key).await;
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        let ids = std::mem::take(&mut self.ids);
        if ids.is_empty() {
            return;
        }
        // Drop cannot wait: the closes run on their own (the handler's runtime is there).
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (door, key) = (self.door.clone(), self.key.take());
        runtime.spawn(async move { close_all(&door, key.as_deref(), ids).await });
    }
}

//! The runner's face of a tenant's lifecycle events and webhooks (`supervisor/events/`): a
//! caller sees and changes its own tenant's only.

use super::Runner;
use crate::supervisor::events::{EventPage, EventQuery, WebhookInfo, WebhookRequest};
use crate::supervisor::{SupervisorError, SupervisorResult};

impl Runner {
    /// The events of `key`'s tenant that `q` asks for.
    pub fn events(&self, key: Option<&str>, q: &EventQuery) -> SupervisorResult<EventPage> {
        let tenant = self.tenant(key);
        self.events
            .list(tenant.id(), q)
            .map_err(SupervisorError::InvalidRequest)
    }

    /// Registers a webhook for `key`'s tenant; its info, with its secret (given this once).
    pub async fn register_webhook(
        &self,
        key: Option<&str>,
        req: WebhookRequest,
    ) -> SupervisorResult<WebhookInfo> {
        let tenant = self.tenant(key);
        self.events.webhooks.register(tenant.id(), req).await
    }

    /// `key`'s tenant's webhooks, with how their deliveries went.
    pub fn webhooks(&self, key: Option<&str>) -> Vec<WebhookInfo> {
        self.events.webhooks.list(self.tenant(key).id())
    }

    /// Deletes `key`'s tenant's webhook `id`.
    pub fn delete_webhook(&self, key: Option<&str>, id: &str) -> SupervisorResult<()> {
        if self.events.webhooks.delete(self.tenant(key).id(), id) {
            Ok(())
        } else {
            Err(SupervisorError::WebhookNotFound(id.to_string()))
        }
    }
}

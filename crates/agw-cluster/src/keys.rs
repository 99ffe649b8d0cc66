//! The Redis key layout, in one place.

/// Builds every key from the configured prefix.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        Self { prefix: prefix.to_owned() }
    }

    /// `{prefix}:node:` — what Lua scripts prepend to a node id to test its lease.
    pub(crate) fn node_prefix(&self) -> String {
        format!("{}:node:", self.prefix)
    }

    /// A node's lease: `{prefix}:node:{id}`.
    pub(crate) fn node(&self, node_id: &str) -> String {
        format!("{}:node:{node_id}", self.prefix)
    }

    /// A node's control inbox: `{prefix}:node:{id}:inbox`.
    pub(crate) fn inbox(&self, node_id: &str) -> String {
        format!("{}:node:{node_id}:inbox", self.prefix)
    }

    /// The reply list of one control request: `{prefix}:reply:{request id}`.
    pub(crate) fn reply(&self, request_id: &str) -> String {
        format!("{}:reply:{request_id}", self.prefix)
    }

    /// A run record: `{prefix}:run:{id}`.
    pub(crate) fn run(&self, run_id: &str) -> String {
        format!("{}:run:{run_id}", self.prefix)
    }

    /// A run's frame stream: `{prefix}:run:{id}:frames`.
    pub(crate) fn frames(&self, run_id: &str) -> String {
        format!("{}:run:{run_id}:frames", self.prefix)
    }

    /// A chat's run lock: `{prefix}:chat:{id}:run`.
    pub(crate) fn chat(&self, chat_id: &str) -> String {
        format!("{}:chat:{chat_id}:run", self.prefix)
    }

    /// An exactly-once claim: `{prefix}:claim:{key}`.
    pub(crate) fn claim(&self, key: &str) -> String {
        format!("{}:claim:{key}", self.prefix)
    }

    /// A limited member set: `{prefix}:limit:{key}`.
    pub(crate) fn limit(&self, key: &str) -> String {
        format!("{}:limit:{key}", self.prefix)
    }

    /// A cool-down: `{prefix}:cooldown:{name}`.
    pub(crate) fn cooldown(&self, name: &str) -> String {
        format!("{}:cooldown:{name}", self.prefix)
    }

    /// A fixed-window hit counter: `{prefix}:window:{key}`.
    pub(crate) fn window(&self, key: &str) -> String {
        format!("{}:window:{key}", self.prefix)
    }

    /// A plain counter: `{prefix}:counter:{key}`.
    pub(crate) fn counter(&self, key: &str) -> String {
        format!("{}:counter:{key}", self.prefix)
    }

    /// A hash of reservations: `{prefix}:reserve:{key}`.
    pub(crate) fn reservations(&self, key: &str) -> String {
        format!("{}:reserve:{key}", self.prefix)
    }
}

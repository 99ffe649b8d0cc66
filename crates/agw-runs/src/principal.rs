//! Who acts on a run: the verified caller the edge authenticated, and the one access rule for
//! chats and runs.

use agw_memory::Owner;

/// The subject of every unauthenticated caller, for quotas.
pub const ANONYMOUS_SUBJECT: &str = "anonymous";

/// A verified caller (the edge puts it in the request's extensions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's `sub`, never blank.
    pub subject: String,
    /// From `agw.auth.tenant-claim`, when configured.
    pub tenant: Option<String>,
    /// Holds the operator role: may see and act on every chat and run.
    pub operator: bool,
}

impl Principal {
    /// What chats and runs this caller creates are owned by.
    pub fn owner(&self) -> Owner {
        Owner { sub: self.subject.clone(), tenant: self.tenant.clone() }
    }

    /// Whether this caller may see or act on something owned by `owner`. Ownerless things (made
    /// without auth) belong to nobody, so only the operator reaches them.
    pub fn can_access(&self, owner: Option<&Owner>) -> bool {
        self.operator || owner.is_some_and(|o| o.sub == self.subject && o.tenant == self.tenant)
    }
}

/// The access rule for every operation that touches a chat or a run: without auth (`None`, the
/// single-user loopback setup) everything is reachable; with auth, [`Principal::can_access`].
/// Refusals must look like absence (not found, `unmatched`): existence is not revealed.
pub fn may_access(principal: Option<&Principal>, owner: Option<&Owner>) -> bool {
    principal.is_none_or(|p| p.can_access(owner))
}

/// The owner of every unauthenticated caller's runs (auth off: one user), for quotas.
pub fn anonymous() -> Owner {
    Owner { sub: ANONYMOUS_SUBJECT.to_owned(), tenant: None }
}

/// The owner a caller's runs count against in quotas.
pub(crate) fn quota_owner(principal: Option<&Principal>) -> Owner {
    principal.map_or_else(anonymous, Principal::owner)
}

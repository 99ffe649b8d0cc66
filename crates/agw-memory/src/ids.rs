//! The ids that name stored chats and runs: canonical lower-case UUIDs only
//! (`agw_protocol::ids::canonical_uuid`). The store does nothing for any other id, and the file
//! backend lists only history files and waiting marks named by one.

use agw_protocol::ids;

/// `id` is a UUID in its canonical lower-case form.
pub(crate) fn is_canonical(id: &str) -> bool {
    ids::canonical_uuid(id).is_some_and(|c| c == id)
}

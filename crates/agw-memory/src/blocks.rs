//! The block numbers a run's history names (`{runId}_c_{n}`, `{runId}_r_{n}`): a run continued
//! in another process — after a wait or a crash — numbers its new blocks after them.

use agw_protocol::BlockCounts;
use agw_protocol::history::StoredMessage;

/// The highest reasoning and content block numbers of `run_id` that `messages` name.
pub(crate) fn block_counts<'a>(run_id: &str, messages: impl IntoIterator<Item = &'a StoredMessage>) -> BlockCounts {
    let mut blocks = BlockCounts::default();
    for message in messages {
        note_block(&mut blocks.content, message.content_id.as_deref(), run_id, "_c_");
        note_block(&mut blocks.reasoning, message.reasoning_id.as_deref(), run_id, "_r_");
    }
    blocks
}

/// Raises `count` to the block number of `id` (`{runId}{infix}{n}`), if it is one of the run's.
fn note_block(count: &mut u32, id: Option<&str>, run_id: &str, infix: &str) {
    let n = id
        .and_then(|id| id.strip_prefix(run_id))
        .and_then(|rest| rest.strip_prefix(infix))
        .and_then(|n| n.parse().ok());
    if let Some(n) = n {
        *count = (*count).max(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_runs_own_numbered_ids_count() {
        let message = |content: &str, reasoning: Option<&str>| StoredMessage {
            content_id: Some(content.into()),
            reasoning_id: reasoning.map(Into::into),
            ..StoredMessage::user(String::new(), 0)
        };
        let messages = [
            message("r_c_2", Some("r_r_1")),
            message("r_c_10", None),
            message("other_c_99", Some("r_r_x")),
            message("r_t1_c_7", None),
        ];
        assert_eq!(block_counts("r", &messages), BlockCounts { reasoning: 1, content: 10 });
    }
}

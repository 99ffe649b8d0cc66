//! One run at a time per chat: a second query into a chat whose run is still going is either
//! refused (409 naming that run, which the client can attach to) or queued behind it
//! (`agw.runs.chat-concurrency`). Two runs writing one chat's history at once would interleave
//! their steps and give each run's model a history without the other's turn.

use std::sync::{Arc, Mutex, PoisonError};

use dashmap::DashMap;
use tokio::sync::OwnedMutexGuard;

#[derive(Debug, Default)]
struct Slot {
    lock: Arc<tokio::sync::Mutex<()>>,
    /// The run holding the slot, for the 409 answer.
    holder: Mutex<Option<String>>,
}

type Slots = DashMap<String, Arc<Slot>>;

/// The slots of every chat with a run in flight or queued.
#[derive(Debug, Default)]
pub struct ChatSlots {
    slots: Arc<Slots>,
}

/// The chat already has a run in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatBusy {
    /// The run holding the chat.
    pub run_id: String,
}

/// Holds a chat for one run; dropping it lets the chat's next run go.
#[derive(Debug)]
pub struct ChatSlot {
    slots: Arc<Slots>,
    chat_id: String,
    slot: Arc<Slot>,
    guard: Option<OwnedMutexGuard<()>>,
}

impl ChatSlots {
    fn slot(&self, chat_id: &str) -> Arc<Slot> {
        self.slots.entry(chat_id.to_string()).or_default().clone()
    }

    fn held(&self, chat_id: &str, slot: Arc<Slot>, guard: OwnedMutexGuard<()>, run_id: &str) -> ChatSlot {
        *slot.holder.lock().unwrap_or_else(PoisonError::into_inner) = Some(run_id.to_string());
        ChatSlot { slots: self.slots.clone(), chat_id: chat_id.to_string(), slot, guard: Some(guard) }
    }

    /// Takes the chat for `run_id` now, or says which run has it.
    pub fn try_acquire(&self, chat_id: &str, run_id: &str) -> Result<ChatSlot, ChatBusy> {
        let slot = self.slot(chat_id);
        match slot.lock.clone().try_lock_owned() {
            Ok(guard) => Ok(self.held(chat_id, slot, guard, run_id)),
            Err(_) => {
                let holder = slot.holder.lock().unwrap_or_else(PoisonError::into_inner).clone();
                // Dropping our reference may leave the entry for the holder to remove.
                Err(ChatBusy { run_id: holder.unwrap_or_default() })
            }
        }
    }

    /// Waits until the chat is free, then takes it for `run_id` (queued runs go in arrival order:
    /// tokio's mutex is fair).
    pub async fn acquire(&self, chat_id: &str, run_id: &str) -> ChatSlot {
        let slot = self.slot(chat_id);
        let guard = slot.lock.clone().lock_owned().await;
        self.held(chat_id, slot, guard, run_id)
    }

    /// The run holding the chat now, if any.
    pub fn holder(&self, chat_id: &str) -> Option<String> {
        let slot = self.slots.get(chat_id)?.clone();
        // Bound to a local: the guard must drop before `slot` does.
        let holder = slot.holder.lock().unwrap_or_else(PoisonError::into_inner).clone();
        #[allow(clippy::let_and_return)]
        holder
    }

    /// Chats with a run in flight or queued.
    pub fn busy(&self) -> usize {
        self.slots.len()
    }
}

impl Drop for ChatSlot {
    fn drop(&mut self) {
        *self.slot.holder.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.guard.take();
        // Forget the chat's entry unless a queued run holds a reference to it: the map holds one,
        // this slot one; a waiter cloned its own under the map's shard lock.
        self.slots.remove_if(&self.chat_id, |_, slot| Arc::strong_count(slot) <= 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_busy_chat_names_its_run_and_frees_on_drop() {
        let slots = ChatSlots::default();
        let first = slots.try_acquire("c", "r1").unwrap();
        assert_eq!(slots.try_acquire("c", "r2").unwrap_err(), ChatBusy { run_id: "r1".into() });
        let other = slots.try_acquire("d", "r3").unwrap();
        drop(first);
        let second = slots.try_acquire("c", "r2").unwrap();
        drop((second, other));
        assert_eq!(slots.busy(), 0, "no entry left behind");
    }

    #[tokio::test]
    async fn queued_runs_start_in_order_when_the_chat_frees() {
        let slots = Arc::new(ChatSlots::default());
        let first = slots.try_acquire("c", "r1").unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for run in ["r2", "r3"] {
            let (slots, tx) = (slots.clone(), tx.clone());
            tokio::spawn(async move {
                let slot = slots.acquire("c", run).await;
                tx.send(run).unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(slot);
            });
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(rx.try_recv().is_err(), "queued while the first run holds the chat");
        drop(first);
        assert_eq!(rx.recv().await, Some("r2"));
        assert_eq!(rx.recv().await, Some("r3"));
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(slots.busy(), 0);
    }
}

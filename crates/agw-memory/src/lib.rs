//! agw-memory — chat memory as JSONL files (`<chatId>.json`) and the chat index (`_chats.jsonl`).
//!
//! Will own: the V3.1 line format, appends that are whole lines written in one call, readers that
//! tolerate torn last lines and legacy keys, the run window sent back to the model, and the
//! snapshot replay source for `GET /api/ap/chat`.
//!
//! Must never: rewrite or truncate history it cannot parse, or know about HTTP.
//!
//! Status: empty until the chat-memory issue lands; nothing here pretends to work yet.

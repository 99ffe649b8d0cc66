-- `migrate_chats`: the chats copied from a JSONL directory, and what their source was then
-- (history file length, SHA-256 of the history bytes and the index record), so that a second
-- run skips what is unchanged and copies again what grew.
CREATE TABLE migrated (
    chat_id      text        PRIMARY KEY,
    source_bytes bigint      NOT NULL,
    source_hash  text        NOT NULL,
    migrated_at  timestamptz NOT NULL DEFAULT now()
);

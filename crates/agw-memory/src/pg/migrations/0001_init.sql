-- agw chat memory on PostgreSQL: the chat index, the history lines, the waiting marks.
-- Runs with `search_path` set to the store's schema (see `pg.rs`, `migrate_schema`).

-- One row per chat: its index record.
CREATE TABLE chats (
    chat_id    text      PRIMARY KEY,
    -- The chat's index line, exactly as the file index (`_chats.jsonl`) writes it: the six
    -- listing keys, then owner, usage, cost and unpriced when there are.
    record     text      NOT NULL,
    -- The record's updatedAt (epoch ms): listings sort on it, newest first.
    updated_at bigint    NOT NULL,
    -- Equal updatedAt: the chat written first comes first, as in the file index.
    seq        bigserial NOT NULL
);
CREATE INDEX chats_updated_at ON chats (updated_at DESC, seq);

-- One row per history line, in append order (`id`). Appends to one chat are serialised by the
-- chat's advisory lock, so a chat's lines commit in `id` order.
CREATE TABLE history (
    id      bigserial PRIMARY KEY,
    chat_id text      NOT NULL,
    line    text      NOT NULL
);
CREATE INDEX history_chat ON history (chat_id, id);

-- Runs that wait for a person (durable waiting).
CREATE TABLE waiting (
    run_id    text        PRIMARY KEY,
    chat_id   text        NOT NULL,
    marked_at timestamptz NOT NULL DEFAULT now()
);

-- Runs in flight (crash recovery): each run's mark, rewritten at its checkpoints and removed
-- when it ends. A server that starts resumes the runs it finds here (`docs/run-lifecycle.md`).
CREATE TABLE running (
    run_id     text        PRIMARY KEY,
    chat_id    text        NOT NULL,
    -- The mark as JSON text (`agw_protocol::history::RunMark`).
    mark       text        NOT NULL,
    -- The mark's revision: a write of an older one (a late write) changes nothing.
    revision   bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX running_chat ON running (chat_id);

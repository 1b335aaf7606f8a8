-- Where a backfill of historical messages got to, so that an interrupted run resumes
-- instead of starting over. One row per named backfill (`--checkpoint`, default
-- `default`); `last_message_id` is the highest message id such that every candidate
-- message up to it has been examined. Written only by real runs, never by dry runs.

CREATE TABLE backfill_checkpoints (
    name            text        PRIMARY KEY,
    last_message_id bigint      NOT NULL,
    -- The bounds of the run that wrote the row, for the operator's information.
    since_id        bigint      NULL,
    until_id        bigint      NULL,
    examined        bigint      NOT NULL DEFAULT 0,
    changed         bigint      NOT NULL DEFAULT 0,
    started_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz NULL
);

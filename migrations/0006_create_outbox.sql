-- The transactional outbox: what a recovery (or a revert) owes the broker is written in the
-- same transaction as the change itself, so a broker failure between the commit and the
-- confirm cannot lose it. The publisher sends each row with a confirm and marks it sent; a
-- relay in every worker sends what stayed pending (a crash, a broker outage, an unroutable
-- publish) with backoff. Rows are plain text bodies, sent byte for byte as written.
--
-- A new table of the worker's own: creating it takes no lock on anything that exists.

CREATE TABLE outbox (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- The ledger row of the pass that wrote it (NULL for a clean message whose direct
    -- publish came back unroutable and was parked here).
    recovery_id     bigint      NULL,
    message_id      bigint      NOT NULL,
    -- Which of the two output exchanges: the names are configuration, resolved when sent.
    target          text        NOT NULL CHECK (target IN ('moderation', 'tool_calls')),
    -- The AMQP message id (deterministic: consumers drop duplicates by it).
    message_key     text        NOT NULL,
    body            text        NOT NULL,
    sent_at         timestamptz NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    last_error      text        NULL,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    -- The same message is owed once: asking again (a repeated revert, a redelivery) finds it.
    UNIQUE (target, message_key)
);

-- The relay's work list: pending rows only (normally a handful).
CREATE INDEX outbox_pending_idx ON outbox (next_attempt_at, id) WHERE sent_at IS NULL;

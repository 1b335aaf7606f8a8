-- The worker's own ledger: one `recoveries` row per recovery pass that changed or recorded
-- something on a message, one `recovery_items` row per leaked call or result object in it.
-- Content and tools_used are kept before and after, and the removed text verbatim, so that
-- every change can be audited and reverted. No foreign keys to the chat app's tables: the
-- ledger must never block the app from deleting its own rows.

CREATE TABLE recoveries (
    id                        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id                bigint      NOT NULL,
    chat_id                   bigint      NOT NULL,
    agent_id                  bigint      NULL,
    source                    text        NOT NULL CHECK (source IN ('event', 'backfill', 'admin')),
    event_id                  uuid        NULL,
    outcome                   text        NOT NULL,
    content_before            text        NULL,
    content_after             text        NULL,
    tools_used_before         jsonb       NOT NULL,
    tools_used_after          jsonb       NOT NULL,
    repaired_tool_message_ids bigint[]    NOT NULL DEFAULT '{}',
    -- The `recovery` object published with the moderation message, so that a redelivered
    -- event republishes the same body.
    summary                   jsonb       NOT NULL,
    created_at                timestamptz NOT NULL DEFAULT now(),
    reverted_at               timestamptz NULL
);

CREATE INDEX recoveries_message_id_idx ON recoveries (message_id, id);
CREATE INDEX recoveries_event_id_idx ON recoveries (event_id) WHERE event_id IS NOT NULL;

CREATE TABLE recovery_items (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recovery_id     bigint      NOT NULL REFERENCES recoveries (id) ON DELETE CASCADE,
    leak_index      integer     NOT NULL,
    item_index      integer     NOT NULL,
    family          text        NOT NULL,
    -- Byte offsets of the leak in recoveries.content_before.
    span_start      integer     NOT NULL,
    span_end        integer     NOT NULL,
    removed_text    text        NOT NULL,
    call_name       text        NULL,
    call_arguments  jsonb       NULL,
    result_object   jsonb       NULL,
    outcome         text        NOT NULL,
    detail          text        NULL,
    memory_id       bigint      NULL,
    tool_message_id bigint      NULL,
    tool_call_id    text        NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (recovery_id, leak_index, item_index)
);

CREATE INDEX recovery_items_outcome_idx ON recovery_items (outcome);

-- Safe rollout (observe mode, revert).
--
-- `mode`: a pass in `observe` mode ran detection and the recovery decision and recorded
-- here what it would have done (outcome, would-be content_after and tools_used_after,
-- the calls), but changed nothing outside the ledger: its items never carry a memory or
-- tool-message id. A later pass in `recover` mode still recovers the message.
--
-- `reverted_*`: a revert puts the message back to content_before / tools_used_before,
-- deletes what the pass created (unless the app edited it since) and marks the row; rows
-- are never deleted. `revert_summary` says what the revert did (deleted and kept ids).
-- A message whose latest ledger row is reverted is left alone by the worker and the
-- backfill; only an explicit admin recover works on it again.

ALTER TABLE recoveries
    ADD COLUMN mode text NOT NULL DEFAULT 'recover' CHECK (mode IN ('recover', 'observe')),
    ADD COLUMN reverted_by text NULL CHECK (reverted_by IN ('cli', 'admin')),
    ADD COLUMN revert_summary jsonb NULL;

-- `toolcall-recovery ledger --chat` and the backfill's revisit of observed messages.
CREATE INDEX recoveries_chat_id_idx ON recoveries (chat_id, id);
CREATE INDEX recoveries_observed_idx ON recoveries (message_id) WHERE mode = 'observe';

-- The model that wrote the message, per recovery pass: `message.model_id` of the event as
-- it came (trimmed, NUL removed, at most 200 bytes; NULL when the event named none), or
-- for the backfill the model column of the app's `messages` table when it has one; NULL
-- for admin passes. Kept as spelled, for the audit; `toolcall-recovery ledger --model`
-- matches it by name or by the metrics' `model` label.
--
-- A nullable column without a default is a catalog change only: no table rewrite, no scan,
-- the ACCESS EXCLUSIVE lock held for an instant. No index and no CHECK on purpose: either
-- would read the whole table under a lock, and `ledger --model` is an operator's query.

-- The instant still waits behind any transaction that holds the table (a long ledger
-- listing, an old replica's pass): give up after a few seconds rather than queue every
-- writer behind the migration; `migrate` fails and can simply run again.
SET LOCAL lock_timeout = '5s';

ALTER TABLE recoveries ADD COLUMN model text NULL;

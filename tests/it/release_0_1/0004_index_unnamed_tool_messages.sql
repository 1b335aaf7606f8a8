-- no-transaction
-- Transcript repair (every recovery pass, and the backfill) looks for role='tool' messages
-- of a chat whose tool_name is empty. Through messages_chat_id_idx alone that reads every
-- message of the chat: 280 ms for a 10,000-message chat, on every leaked message of it.
-- This partial index holds only the unnamed tool messages (normally none), so the repair
-- costs what there is to repair. It is the one object the worker adds to a table of the
-- chat app: an index, no column is touched; CONCURRENTLY, so the app's writes are never
-- blocked while it builds (hence no transaction for this migration). If a concurrent build
-- fails it leaves an INVALID index that IF NOT EXISTS would skip: drop it and migrate again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS tcr_messages_unnamed_tool_idx
    ON messages (chat_id)
    WHERE role = 'tool' AND coalesce(tool_name, '') = '';

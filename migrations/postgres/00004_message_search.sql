-- Trigram index of message text for thread search: the text of agent
-- messages and the text inputs of user messages, lowered, so that the
-- case-insensitive substring match of the scan it replaces (a LIKE
-- '%term%') is answered from the index for terms of three characters or
-- more. Building the index indexes the rows already stored. pg_trgm ships
-- with Postgres and is a trusted extension (Postgres 13 on): a user with
-- CREATE on the database may create it.

-- +goose Up
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- The searchable text of an item: what store.MessageTexts reads, the text
-- inputs of a user message joined by newlines; NULL for other items.
-- +goose StatementBegin
CREATE FUNCTION item_message_text(typ text, payload jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT lower(CASE typ
        WHEN 'agentMessage' THEN payload->>'text'
        WHEN 'userMessage' THEN (
            SELECT string_agg(c->>'text', E'\n')
            FROM jsonb_array_elements(CASE WHEN jsonb_typeof(payload->'content') = 'array'
                                           THEN payload->'content' ELSE '[]'::jsonb END) c)
    END)
$$;
-- +goose StatementEnd

CREATE INDEX items_message_text_idx ON items
    USING gin (item_message_text(type, payload) gin_trgm_ops)
    WHERE type IN ('agentMessage', 'userMessage');

-- +goose Down
DROP INDEX items_message_text_idx;
DROP FUNCTION item_message_text(text, jsonb);

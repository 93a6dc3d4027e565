-- Full-text index of message text for thread search: the text of agent
-- messages and of each text input of user messages, one row each, kept by
-- triggers on items so that no write path changes and the rows already
-- stored are indexed here. The trigram tokenizer makes a phrase query a
-- case-insensitive substring match (Unicode case folded by FTS5), the
-- semantics of the scan it replaces; terms under three characters have no
-- trigram and are matched by scanning item_text.

-- +goose Up
CREATE TABLE item_text (
    id        INTEGER PRIMARY KEY,
    thread_id TEXT    NOT NULL,
    seq       INTEGER NOT NULL, -- the item's
    text      TEXT    NOT NULL
) STRICT;

-- deleting an item's rows, and the short-term scan of one thread
CREATE INDEX item_text_item_idx ON item_text (thread_id, seq);

-- External content: the index keeps no second copy of the text.
CREATE VIRTUAL TABLE item_text_fts USING fts5 (
    text,
    content = 'item_text',
    content_rowid = 'id',
    tokenize = 'trigram'
);

-- +goose StatementBegin
CREATE TRIGGER item_text_ai AFTER INSERT ON item_text BEGIN
    INSERT INTO item_text_fts (rowid, text) VALUES (new.id, new.text);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER item_text_ad AFTER DELETE ON item_text BEGIN
    INSERT INTO item_text_fts (item_text_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
-- +goose StatementEnd

-- The texts store.MessageTexts reads; invalid JSON has none rather than
-- failing the write.
-- +goose StatementBegin
CREATE TRIGGER items_text_ai AFTER INSERT ON items
WHEN new.type IN ('agentMessage', 'userMessage') AND json_valid(new.payload) BEGIN
    INSERT INTO item_text (thread_id, seq, text)
    SELECT new.thread_id, new.seq, json_extract(new.payload, '$.text')
    WHERE new.type = 'agentMessage' AND json_type(new.payload, '$.text') = 'text'
    UNION ALL
    SELECT new.thread_id, new.seq, json_extract(c.value, '$.text')
    FROM json_each(new.payload, '$.content') c
    WHERE new.type = 'userMessage' AND json_type(new.payload, '$.content') = 'array'
      AND json_type(c.value, '$.text') = 'text';
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER items_text_ad AFTER DELETE ON items
WHEN old.type IN ('agentMessage', 'userMessage') BEGIN
    DELETE FROM item_text WHERE thread_id = old.thread_id AND seq = old.seq;
END;
-- +goose StatementEnd

-- the messages stored before this migration
INSERT INTO item_text (thread_id, seq, text)
SELECT i.thread_id, i.seq, json_extract(i.payload, '$.text')
FROM items i
WHERE i.type = 'agentMessage' AND json_valid(i.payload) AND json_type(i.payload, '$.text') = 'text'
UNION ALL
SELECT i.thread_id, i.seq, json_extract(c.value, '$.text')
FROM items i, json_each(i.payload, '$.content') c
WHERE i.type = 'userMessage' AND json_valid(i.payload) AND json_type(i.payload, '$.content') = 'array'
  AND json_type(c.value, '$.text') = 'text';

-- +goose Down
DROP TRIGGER items_text_ad;
DROP TRIGGER items_text_ai;
DROP TRIGGER item_text_ad;
DROP TRIGGER item_text_ai;
DROP TABLE item_text_fts;
DROP TABLE item_text;

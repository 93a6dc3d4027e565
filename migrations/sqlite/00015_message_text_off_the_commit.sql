-- A message's searchable text (item_text) is taken from the items after
-- the commit that stores them instead of by a trigger inside it: parsing
-- the message's JSON and writing item_text and its index in the commit
-- were about a sixth of the store's CPU for a plain turn. The store's
-- indexer extracts the items past item_text_extracted.through in batches
-- of its own (internal/store/sqlite, msgindex.go), then indexes them as
-- before (00014); a search scans the few items past the mark too, so that
-- it finds a message as soon as it is stored.

-- +goose Up
-- through is the greatest items rowid whose text is in item_text: every
-- message item up to it has its rows there, none past it.
CREATE TABLE item_text_extracted (
    id      INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    through INTEGER NOT NULL
) STRICT;

-- The trigger of 00004 extracted every item so far.
INSERT INTO item_text_extracted (id, through) SELECT 1, coalesce(max(rowid), 0) FROM items;

DROP TRIGGER items_text_ai;

-- An item that takes the rowid of a deleted one at or below the mark (the
-- rowids of the greatest items are reused once deleted) is extracted at
-- once, as every item was before. The CASE keeps json_valid off every
-- other item: SQLite evaluates the right side of an AND first when only
-- the left one holds a subquery. A content element that is no object has
-- no text (the extraction's rule, internal/store/sqlite/msgindex.go).
--
-- The mark stands on the items' rowids, which VACUUM keeps: anything that
-- rebuilds the items table must extract every item past the mark first,
-- or keep the rowids.
-- +goose StatementBegin
CREATE TRIGGER items_text_ai AFTER INSERT ON items
WHEN CASE WHEN new.type IN ('agentMessage', 'userMessage') AND new.rowid <= (SELECT through FROM item_text_extracted)
  THEN json_valid(new.payload) END BEGIN
    INSERT INTO item_text (thread_id, seq, text)
    SELECT new.thread_id, new.seq, json_extract(new.payload, '$.text')
    WHERE new.type = 'agentMessage' AND json_type(new.payload, '$.text') = 'text'
    UNION ALL
    SELECT new.thread_id, new.seq, json_extract(c.value, '$.text')
    FROM json_each(new.payload, '$.content') c
    WHERE new.type = 'userMessage' AND json_type(new.payload, '$.content') = 'array'
      AND CASE WHEN c.type = 'object' THEN json_type(c.value, '$.text') = 'text' END;
END;
-- +goose StatementEnd

-- +goose Down
-- The items past the mark, extracted as the store's indexer does.
INSERT INTO item_text (thread_id, seq, text)
SELECT i.thread_id, i.seq, json_extract(i.payload, '$.text')
FROM items i
WHERE i.rowid > (SELECT through FROM item_text_extracted) AND i.type = 'agentMessage'
  AND CASE WHEN json_valid(i.payload) THEN json_type(i.payload, '$.text') = 'text' END
UNION ALL
SELECT i.thread_id, i.seq, json_extract(c.value, '$.text')
FROM items i, json_each(CASE WHEN i.type = 'userMessage' AND json_valid(i.payload)
  AND json_type(i.payload, '$.content') = 'array' THEN i.payload END, '$.content') c
WHERE i.rowid > (SELECT through FROM item_text_extracted) AND i.type = 'userMessage'
  AND CASE WHEN c.type = 'object' THEN json_type(c.value, '$.text') = 'text' END
ORDER BY 1, 2;

DROP TRIGGER items_text_ai;
DROP TABLE item_text_extracted;

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

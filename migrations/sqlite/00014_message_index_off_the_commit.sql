-- The message index is brought up to date after the commit that stores a
-- message instead of inside it: item_text keeps getting its rows from the
-- items' triggers in the same transaction, and the store adds the rows
-- past item_text_indexed.through to item_text_fts in batches of its own
-- (internal/store/sqlite, indexMessages). A search matches the indexed
-- rows through item_text_fts and scans the few rows past the mark, in one
-- statement, so that it finds a message as soon as it is stored.

-- +goose Up
-- through is the greatest item_text id in item_text_fts: every row up to
-- it is indexed, none past it.
CREATE TABLE item_text_indexed (
    id      INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    through INTEGER NOT NULL
) STRICT;

-- The triggers of 00004 indexed every row so far.
INSERT INTO item_text_indexed (id, through) SELECT 1, coalesce(max(id), 0) FROM item_text;

DROP TRIGGER item_text_ai;
DROP TRIGGER item_text_ad;

-- A row that takes the id of a deleted one at or below the mark (ids of
-- the greatest rows are reused once deleted) is indexed at once.
-- +goose StatementBegin
CREATE TRIGGER item_text_ai AFTER INSERT ON item_text
WHEN new.id <= (SELECT through FROM item_text_indexed) BEGIN
    INSERT INTO item_text_fts (rowid, text) VALUES (new.id, new.text);
END;
-- +goose StatementEnd

-- Only an indexed row has index entries to delete.
-- +goose StatementBegin
CREATE TRIGGER item_text_ad AFTER DELETE ON item_text
WHEN old.id <= (SELECT through FROM item_text_indexed) BEGIN
    INSERT INTO item_text_fts (item_text_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
-- +goose StatementEnd

-- +goose Down
INSERT INTO item_text_fts (rowid, text)
SELECT id, text FROM item_text WHERE id > (SELECT through FROM item_text_indexed);
DROP TRIGGER item_text_ad;
DROP TRIGGER item_text_ai;
DROP TABLE item_text_indexed;

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

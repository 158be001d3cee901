-- Each cell's preview host: the router sends public preview paths (/preview/w/{ws}/...) there.
-- Empty means the cell has no preview host; the router answers its preview paths with 503.
ALTER TABLE cells ADD COLUMN preview_url TEXT NOT NULL DEFAULT '';

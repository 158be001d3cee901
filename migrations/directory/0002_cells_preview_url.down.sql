ALTER TABLE cells DROP COLUMN preview_url;

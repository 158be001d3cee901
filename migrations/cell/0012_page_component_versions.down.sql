DROP TABLE component_versions;
DROP TABLE components;
DROP TABLE page_versions;
DROP INDEX pages_live_key_idx;
ALTER TABLE pages DROP COLUMN metadata_version;
ALTER TABLE pages DROP COLUMN tags;
ALTER TABLE pages DROP COLUMN description;

DROP TABLE moves;
DROP TABLE memberships;
DROP TABLE placements;
DROP TABLE workspaces;
DROP TABLE tokens;
DROP TABLE users;
DROP TABLE cells;

DROP TABLE assets;

DROP TABLE pages;

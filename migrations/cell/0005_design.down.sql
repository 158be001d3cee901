DROP TABLE styles;
DROP TABLE themes;
DROP TABLE font_faces;
DROP TABLE font_families;

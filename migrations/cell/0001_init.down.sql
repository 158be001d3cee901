DROP TABLE tenancy;

DROP TABLE workspace_limits;

DROP TABLE agent_configs;

DROP TABLE render_operator_actions;
ALTER TABLE render_workers DROP COLUMN quarantined_at;
ALTER TABLE render_workers DROP COLUMN cgroup_id;
ALTER TABLE render_workers DROP COLUMN boot_id;

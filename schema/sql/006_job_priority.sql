-- tessel store, version 6: a job's priority (issue 17). Leases go to the highest priority first
-- and are shared fairly among the jobs of one priority; 0 is the default, and what jobs created
-- before this migration read back. Applied once by the migration runner, like 001.

ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;

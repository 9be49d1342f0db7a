-- tessel store, version 3: a job keeps the effort preset it was submitted with and, once final,
-- why its search stopped, so both survive a server restart. '' means "none" (and is what jobs
-- created before this migration read back). Applied once by the migration runner, like 001.

ALTER TABLE jobs ADD COLUMN effort TEXT NOT NULL DEFAULT '';   -- quick | default | full | ''
-- budget | time_limit | no_improvement | target_reached | exhausted | cancelled | ''
ALTER TABLE jobs ADD COLUMN stopped_by TEXT NOT NULL DEFAULT '';

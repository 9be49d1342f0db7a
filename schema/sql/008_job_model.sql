-- tessel store, version 8: the model job a job belongs to (issue 21). `tessel tune-model` runs a
-- model's kernels as jobs of one round each and labels them all with the model job's name
-- ("llama3-8b-prefill on snc3 at 2026-12-06 21:30:05"); '' for a job of its own, and what jobs
-- created before this migration read back. Applied once by the migration runner, like 001.

ALTER TABLE jobs ADD COLUMN model TEXT NOT NULL DEFAULT '';

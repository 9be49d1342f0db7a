-- tessel store, version 9: a job's lockstep batch (v1::SubmitJobRequest.lockstep; 0 = pipelined),
-- so that a job resumed after a restart keeps proposing in batches. Jobs created before this
-- migration read back 0. Applied once by the migration runner, like 001.

ALTER TABLE jobs ADD COLUMN lockstep INTEGER NOT NULL DEFAULT 0;

-- tessel store, version 2: a job keeps its early-stop limits, so a job resumed after a server
-- restart still stops early. 0 means "no such limit" (and is what jobs created before this
-- migration read back). Applied once by the migration runner, like 001.

ALTER TABLE jobs ADD COLUMN time_limit_s INTEGER NOT NULL DEFAULT 0
  CHECK (time_limit_s >= 0);   -- wall time since created_ms, restarts included
ALTER TABLE jobs ADD COLUMN stop_after_no_improvement INTEGER NOT NULL DEFAULT 0
  CHECK (stop_after_no_improvement >= 0);   -- charged trials in a row without a faster result
ALTER TABLE jobs ADD COLUMN target_time_ns REAL NOT NULL DEFAULT 0
  CHECK (target_time_ns >= 0);   -- stop once a result is at least this fast

-- tessel store, version 1. Applied once by the migration runner (schema_migrations records it).
-- Every measurement is a row in trials; best holds immutable publications addressed by snapshot.

CREATE TABLE workloads (
  id      INTEGER PRIMARY KEY,
  kernel  TEXT NOT NULL,
  dims    TEXT NOT NULL,   -- canonical form: sorted by name, "K=512,M=512,N=512"
  dtype   TEXT NOT NULL,
  target  TEXT NOT NULL,
  UNIQUE (kernel, dims, dtype, target)
);

CREATE TABLE jobs (
  id              INTEGER PRIMARY KEY,
  workload_id     INTEGER NOT NULL REFERENCES workloads(id),
  dims_display    TEXT NOT NULL,   -- dims in the kernel's order, for people
  kernel_version  INTEGER NOT NULL,
  target_version  INTEGER NOT NULL,
  strategy        TEXT NOT NULL,
  budget          INTEGER NOT NULL CHECK (budget > 0),
  seed            INTEGER NOT NULL,
  state           TEXT NOT NULL
                  CHECK (state IN ('queued', 'running', 'completed', 'cancelled', 'failed')),
  message         TEXT NOT NULL DEFAULT '',
  default_config  TEXT NOT NULL,
  roofline_ns     REAL NOT NULL DEFAULT 0,
  created_ms      INTEGER NOT NULL,
  finished_ms     INTEGER
);
CREATE INDEX jobs_by_state ON jobs(state);

CREATE TABLE trials (
  id            INTEGER PRIMARY KEY,   -- assigned by the scheduler when the trial is proposed
  job_id        INTEGER NOT NULL REFERENCES jobs(id),
  config        TEXT NOT NULL,
  status        TEXT NOT NULL CHECK (status IN ('OK', 'INVALID_CONFIG', 'WRONG_ANSWER',
                    'RUNTIME_ERROR', 'TIMEOUT', 'WORKER_LOST', 'CANCELLED')),
  time_ns       REAL,                  -- median of samples; NULL unless OK
  samples_json  TEXT NOT NULL DEFAULT '[]',
  message       TEXT NOT NULL DEFAULT '',
  bound         TEXT NOT NULL DEFAULT '',
  stats_json    TEXT NOT NULL DEFAULT '{}',
  verified      INTEGER NOT NULL DEFAULT 0,
  is_default    INTEGER NOT NULL DEFAULT 0,  -- the kernel's default config, measured first
  is_verify     INTEGER NOT NULL DEFAULT 0,  -- re-measure of a best candidate with verification
  worker_id     TEXT NOT NULL DEFAULT '',
  created_ms    INTEGER NOT NULL
);
CREATE INDEX trials_by_job ON trials(job_id);

CREATE TABLE snapshots (
  id          INTEGER PRIMARY KEY,
  created_ms  INTEGER NOT NULL,
  note        TEXT NOT NULL DEFAULT ''
);

-- Publications are never updated: a newer result is a new row with a newer snapshot id.
CREATE TABLE best (
  id              INTEGER PRIMARY KEY,
  workload_id     INTEGER NOT NULL REFERENCES workloads(id),
  kernel_version  INTEGER NOT NULL,
  target_version  INTEGER NOT NULL,
  config          TEXT NOT NULL,
  time_ns         REAL NOT NULL,
  job_id          INTEGER REFERENCES jobs(id),
  trial_id        INTEGER,
  snapshot_id     INTEGER NOT NULL REFERENCES snapshots(id),
  published_ms    INTEGER NOT NULL
);
CREATE INDEX best_by_workload ON best(workload_id, snapshot_id);

CREATE TABLE workers (
  id                 TEXT PRIMARY KEY,
  name               TEXT NOT NULL,
  targets            TEXT NOT NULL DEFAULT '',
  slots              INTEGER NOT NULL DEFAULT 1,
  registered_ms      INTEGER NOT NULL,
  last_heartbeat_ms  INTEGER NOT NULL,
  trials_done        INTEGER NOT NULL DEFAULT 0
);

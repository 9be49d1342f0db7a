-- tessel store, version 4: a worker the server quarantined (another worker's re-measurement
-- contradicted its report) keeps the reason, so that after a restart its results are not trusted
-- again: a resumed job re-queues them. '' means "not quarantined". Applied once, like 001.

ALTER TABLE workers ADD COLUMN quarantine_reason TEXT NOT NULL DEFAULT '';

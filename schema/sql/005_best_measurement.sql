-- tessel store, version 5: a published best keeps how its time was measured, so a reader can
-- tell a noiseless time from a noisy estimate: the half-width of its 95% confidence interval
-- (0 when measured without noise or not promoted), the samples its time is the median of, and
-- the simulated noise (relative sigma). Rows published before read 0 for all three. Applied
-- once, like 001.

ALTER TABLE best ADD COLUMN time_ci_ns REAL NOT NULL DEFAULT 0;
ALTER TABLE best ADD COLUMN samples INTEGER NOT NULL DEFAULT 0;
ALTER TABLE best ADD COLUMN noise_sigma REAL NOT NULL DEFAULT 0;

-- tessel store, version 7: who proposed each trial (issue 18: the dashboard colours the
-- convergence plot by auto's arm). Trials stored before read back ''.

ALTER TABLE trials ADD COLUMN arm TEXT NOT NULL DEFAULT '';

-- tessel store, version 10: the credential a worker registered with (the fingerprint of its named
-- token, server/auth.h; '' for an unnamed token or without a token table). A worker quarantined for lying quarantines its
-- credential: no new worker registers with that token, also after a restart. Applied once, like
-- 001.

ALTER TABLE workers ADD COLUMN credential TEXT NOT NULL DEFAULT '';

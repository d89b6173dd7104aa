-- What each host's agent last said it cannot see (a JSON array of {check, detail, fix}, as the
-- agent sent it, checked): `[]` when it sees everything, and for hosts whose agents predate it.
ALTER TABLE hosts ADD COLUMN blind_spots_json TEXT NOT NULL DEFAULT '[]';

-- What the host sees of a VM's setup (issue 29); the same as SQLite's 0017.
ALTER TABLE guests ADD COLUMN hyperv TEXT;
ALTER TABLE guests ADD COLUMN hpet BOOLEAN;
ALTER TABLE guests ADD COLUMN os_hint TEXT;
ALTER TABLE guests ADD COLUMN platform TEXT;

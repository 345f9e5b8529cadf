ALTER TABLE {{schema}}.things ADD COLUMN extra int NOT NULL DEFAULT 0;

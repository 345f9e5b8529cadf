CREATE TABLE {{schema}}.things (id bigserial PRIMARY KEY, name text NOT NULL);
CREATE INDEX things_name_idx ON {{schema}}.things (name);

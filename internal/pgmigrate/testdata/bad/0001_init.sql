CREATE TABLE {{schema}}.good (id int);

CREATE TABLE {{schema}}.half (id int);
THIS IS NOT SQL;

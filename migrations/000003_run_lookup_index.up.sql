-- A credential plan's newest run is found by prefix (mutation_id =
-- '<plan>' OR mutation_id ~ '^<plan>:run-[0-9]+$', store.PrepareRun). The
-- UNIQUE index on mutation_id serves the equality but not the anchored
-- pattern in a non-C collation, so every run scanned the whole operations
-- table. A text_pattern_ops index serves the prefix in any collation.
CREATE INDEX operations_mutation_id_pattern ON keyledger.operations (mutation_id text_pattern_ops);

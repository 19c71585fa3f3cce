-- A command's newest run is the one with the highest run number.
--
-- PrepareRun chose a command's newest run by row id, with the operation
-- journaled under the command's bare mutation ID (an older keyledger's,
-- "run 0") in the same race. A row inserted later under a lower number, or
-- under the bare ID once runs exist (a namespace role can insert either),
-- then became "newest": numbering restarted and PrepareRun handed back an
-- ended run, which refuses replay-run-ended on every sync. The run number
-- is a stored generated column beside run_series (migration 6), indexed
-- with it, so the newest run is one index probe by number.
ALTER TABLE keyledger.operations ADD COLUMN run_number bigint
  GENERATED ALWAYS AS ((substring(mutation_id FROM ':run-([1-9][0-9]{0,9})$'))::bigint) STORED;
CREATE INDEX operations_run_number ON keyledger.operations (run_series, run_number DESC) WHERE run_series IS NOT NULL;

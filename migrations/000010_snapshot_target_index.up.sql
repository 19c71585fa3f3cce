-- A versioned write whose cost does not grow with the Secret's history.
--
-- The versioned family proves which snapshot Secrets keyledger created
-- from the journal (store.StepRecords): the create-snapshot calls bound to
-- the live UID, and the UIDs their creates answered with. Until now it
-- found them through operations_target and records_operation_step: every
-- operation ever run on the Secret, one index probe each, so a Secret
-- updated daily read a year of operations on every update. Only the
-- snapshots a run's history listing returned matter (at most the
-- retention limit plus one, and whatever else claims the UID): the reader
-- now names their targets, and this index finds each target's
-- create-snapshot records in one probe.
--
-- Partial to the create-snapshot step: no other record pays for it on
-- insert (a versioned write journals one call and one result of that step;
-- every other step, and every other family, adds nothing to it).
CREATE INDEX records_snapshot_target ON keyledger.records (target, operation_id, id)
  WHERE step = 'create-snapshot';

-- Dropping the journal drops every operation and record. That is refused
-- unless the session says it means it (keyledger migrate down
-- --destroy-journal-records sets keyledger.destroy_journal_records = yes):
-- an empty journal goes, a journal that holds anything stays, whole. The
-- tables are locked first, so nothing is appended between the look and the
-- drop.
LOCK TABLE keyledger.operations, keyledger.records IN ACCESS EXCLUSIVE MODE;
DO $$
BEGIN
  IF coalesce(current_setting('keyledger.destroy_journal_records', true), '') <> 'yes'
     AND (EXISTS (SELECT 1 FROM keyledger.operations) OR EXISTS (SELECT 1 FROM keyledger.records)) THEN
    RAISE EXCEPTION 'migration 1 down would drop keyledger.operations and keyledger.records, which hold % operations and % records',
      (SELECT count(*) FROM keyledger.operations), (SELECT count(*) FROM keyledger.records)
      USING ERRCODE = 'KL001';
  END IF;
END;
$$;
DROP TABLE IF EXISTS keyledger.records;
DROP TABLE IF EXISTS keyledger.operations;
DROP TABLE IF EXISTS keyledger.state_edges;
DROP FUNCTION IF EXISTS keyledger.guard_operation_update();
DROP FUNCTION IF EXISTS keyledger.guard_operation_insert();
DROP FUNCTION IF EXISTS keyledger.refuse_record_change();
DROP TYPE IF EXISTS keyledger.record_kind;
DROP TYPE IF EXISTS keyledger.operation_state;

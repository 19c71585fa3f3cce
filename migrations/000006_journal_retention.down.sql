-- Back to migration 5: no prune, every DELETE refused again.
--
-- Going down drops the prune events. Events that record a prune are
-- refused unless the session says it means it (keyledger migrate down
-- --destroy-journal-records sets keyledger.destroy_journal_records = yes).
LOCK TABLE keyledger.prune_events IN ACCESS EXCLUSIVE MODE;
DO $$
BEGIN
  IF coalesce(current_setting('keyledger.destroy_journal_records', true), '') <> 'yes'
     AND EXISTS (SELECT 1 FROM keyledger.prune_events) THEN
    RAISE EXCEPTION 'migration 6 down would drop keyledger.prune_events, which holds % prune events',
      (SELECT count(*) FROM keyledger.prune_events)
      USING ERRCODE = 'KL001';
  END IF;
END;
$$;

DROP INDEX keyledger.records_operation_step;
DROP INDEX keyledger.operations_target;
DROP INDEX keyledger.operations_run_series;
ALTER TABLE keyledger.operations DROP COLUMN run_series;

DROP FUNCTION keyledger.prune(interval);

DROP TRIGGER records_delete_only_pruned ON keyledger.records;
DROP TRIGGER records_append_only ON keyledger.records;
CREATE TRIGGER records_append_only BEFORE UPDATE OR DELETE ON keyledger.records
  FOR EACH ROW EXECUTE FUNCTION keyledger.refuse_record_change();

DROP TRIGGER operations_delete_only_pruned ON keyledger.operations;
DROP TRIGGER operations_forward_only ON keyledger.operations;
CREATE TRIGGER operations_forward_only BEFORE UPDATE OR DELETE ON keyledger.operations
  FOR EACH ROW EXECUTE FUNCTION keyledger.guard_operation_update();

DROP FUNCTION keyledger.guard_pruned_delete();
DROP TABLE keyledger.prune_events;

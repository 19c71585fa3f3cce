-- Back to migration 10: the append-after-final guard as a BEFORE INSERT row
-- trigger (guard_record_insert, as migration 5 defined it).
DROP TRIGGER records_b_not_final ON keyledger.records;
DROP FUNCTION keyledger.guard_records_appended();

CREATE FUNCTION keyledger.guard_record_insert() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  op_state keyledger.operation_state;
  op_finished xid8;
  op_mutation text;
BEGIN
  SELECT o.state, o.finished_xact, o.mutation_id INTO op_state, op_finished, op_mutation
    FROM keyledger.operations o WHERE o.id = NEW.operation_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN NEW;
  END IF;
  IF op_state IN ('completed', 'refused') AND op_finished IS DISTINCT FROM pg_current_xact_id() THEN
    RAISE EXCEPTION 'keyledger operation % is final (%): nothing may be appended', op_mutation, op_state
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER records_b_not_final BEFORE INSERT ON keyledger.records
  FOR EACH ROW EXECUTE FUNCTION keyledger.guard_record_insert();

-- Back to call control in detail: the columns' values return to the keys
-- migration 000003's engine read.
DO $$
DECLARE
  operator text := coalesce(nullif(current_setting('keyledger.operator_role', true), ''), 'keyledger_operator');
BEGIN
  EXECUTE format('REVOKE INSERT (batch, final) ON keyledger.records FROM %I', operator);
END;
$$;

ALTER TABLE keyledger.records DROP CONSTRAINT records_call_control;
ALTER TABLE keyledger.records DISABLE TRIGGER records_append_only;
UPDATE keyledger.records
   SET detail = detail || jsonb_build_object('batch', batch, 'final', final)
 WHERE kind = 'authority_call';
ALTER TABLE keyledger.records ENABLE TRIGGER records_append_only;
ALTER TABLE keyledger.records DROP COLUMN batch, DROP COLUMN final;

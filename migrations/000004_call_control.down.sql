-- Back to call control in detail: the columns' values return to the keys
-- migration 000003's engine read.
DO $$
DECLARE
  operator text := coalesce(nullif(current_setting('keyledger.operator_role', true), ''), 'keyledger_operator');
BEGIN
  -- Since migration 000005 a journal has no shared operator role: a fresh
  -- install need not declare one, and grants are per namespace role
  -- (keyledger journal grant). An existing journal's role keeps these
  -- rights until 000005 revokes them.
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = operator) THEN
    EXECUTE format('REVOKE INSERT (batch, final) ON keyledger.records FROM %I', operator);
  END IF;
END;
$$;

ALTER TABLE keyledger.records DROP CONSTRAINT records_call_control;
ALTER TABLE keyledger.records DISABLE TRIGGER records_append_only;
UPDATE keyledger.records
   SET detail = detail || jsonb_build_object('batch', batch, 'final', final)
 WHERE kind = 'authority_call';
ALTER TABLE keyledger.records ENABLE TRIGGER records_append_only;
ALTER TABLE keyledger.records DROP COLUMN batch, DROP COLUMN final;

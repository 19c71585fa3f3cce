-- An authority call's control data is typed: the batch it was sent in and
-- whether it is the operation's final call are columns the engine reads,
-- not keys of the free-form detail (which came back from JSON as a float).
-- Only an authority_call carries them.
ALTER TABLE keyledger.records
  ADD COLUMN batch integer,
  ADD COLUMN final boolean NOT NULL DEFAULT false;

-- Calls journaled before this migration carry the two keys in detail: move
-- them into the columns. Records are append-only for everyone; the schema
-- owner lifts that guard for this one rewrite, inside the migration's
-- transaction, and puts it back before anything else can append.
ALTER TABLE keyledger.records DISABLE TRIGGER records_append_only;
UPDATE keyledger.records
   SET batch  = coalesce((detail->>'batch')::integer, 0),
       final  = coalesce((detail->>'final')::boolean, false),
       detail = detail - 'batch' - 'final'
 WHERE kind = 'authority_call';
ALTER TABLE keyledger.records ENABLE TRIGGER records_append_only;

ALTER TABLE keyledger.records ADD CONSTRAINT records_call_control CHECK (
  CASE WHEN kind = 'authority_call' THEN batch IS NOT NULL AND batch >= 0
       ELSE batch IS NULL AND NOT final END);

DO $$
DECLARE
  operator text := coalesce(nullif(current_setting('keyledger.operator_role', true), ''), 'keyledger_operator');
BEGIN
  -- Since migration 000005 a journal has no shared operator role: a fresh
  -- install need not declare one, and grants are per namespace role
  -- (keyledger journal grant). An existing journal's role keeps these
  -- rights until 000005 revokes them.
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = operator) THEN
    EXECUTE format('GRANT INSERT (batch, final) ON keyledger.records TO %I', operator);
  END IF;
END;
$$;

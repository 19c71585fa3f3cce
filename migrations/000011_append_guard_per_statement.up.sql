-- The append-after-final guard, once per statement instead of once per row.
--
-- Every record a run appends went through guard_record_insert (migrations
-- 2 and 5), a BEFORE INSERT row trigger: one PL/pgSQL call with its pinned
-- search_path, and one SELECT ... FOR NO KEY UPDATE of the same operation
-- row, per record. keyledger appends its records many to a statement (a
-- move's unnest, migration 9's CTE), almost always to one operation: a
-- 64-Secret credential plan appends about two hundred records, and the
-- guard was most of their cost. Measured as a namespace role (EXPLAIN
-- ANALYZE of an INSERT ... SELECT of 200 records, warm session): the row
-- guard took 10.6 to 12.4 ms of an insert of 15 to 19 ms; this one takes
-- 0.6 ms, and the insert 7 ms.
--
-- The guarantee is the same: nothing is appended to a finished operation
-- unless this very transaction finished it (finished_xact, 64-bit, against
-- pg_current_xact_id()), whoever appends, the owner included. The trigger
-- fires AFTER each INSERT statement on records, over the rows it inserted
-- (a transition table), locks every operation they belong to (FOR NO KEY
-- UPDATE, in id order) and refuses the whole statement, 42501 with the same
-- message, when one of them is final. The lock still makes an append wait
-- for a concurrent finish and then see it: in READ COMMITTED a locking
-- SELECT returns the newest version of a row it waited for. It runs as the
-- invoker, as before: an operation the role may not see is not found here,
-- and the records policy's WITH CHECK has already refused the row.
--
-- One thing differs, for a statement that breaks two rules at once: the
-- row trigger refused an append to a finished operation before the row's
-- CHECK and unique constraints were looked at, and this one runs after
-- them, so such an append (a second ending, say) is now refused by the
-- constraint (23505, 23514) instead of 42501. Either way nothing is
-- appended. keyledger itself appends through a move of the operation,
-- which the operation's own update trigger refuses first.
CREATE FUNCTION keyledger.guard_records_appended() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  op record;
BEGIN
  FOR op IN
    SELECT o.state, o.finished_xact, o.mutation_id
      FROM keyledger.operations o
      WHERE o.id IN (SELECT a.operation_id FROM appended a)
      ORDER BY o.id
      FOR NO KEY UPDATE OF o
  LOOP
    IF op.state IN ('completed', 'refused') AND op.finished_xact IS DISTINCT FROM pg_current_xact_id() THEN
      RAISE EXCEPTION 'keyledger operation % is final (%): nothing may be appended', op.mutation_id, op.state
        USING ERRCODE = 'insufficient_privilege';
    END IF;
  END LOOP;
  RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION keyledger.guard_records_appended() FROM PUBLIC;

DROP TRIGGER records_b_not_final ON keyledger.records;
DROP FUNCTION keyledger.guard_record_insert();
CREATE TRIGGER records_b_not_final AFTER INSERT ON keyledger.records
  REFERENCING NEW TABLE AS appended
  FOR EACH STATEMENT EXECUTE FUNCTION keyledger.guard_records_appended();

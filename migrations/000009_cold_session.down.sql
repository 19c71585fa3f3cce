-- Back to migration 8: the policies' namespace subquery, the SQL owner
-- check, the bounded patterns, and the stamp_row and
-- guard_operation_insert triggers.
DROP POLICY records_namespace ON keyledger.records;
CREATE POLICY records_namespace ON keyledger.records FOR ALL
  USING (EXISTS (SELECT 1 FROM keyledger.operations o
                 WHERE o.id = records.operation_id
                   AND o.target_namespace IN (SELECT g.namespace FROM keyledger.namespace_grants g WHERE g.role = current_user)))
  WITH CHECK (EXISTS (SELECT 1 FROM keyledger.operations o
                      WHERE o.id = records.operation_id
                        AND o.target_namespace IN (SELECT g.namespace FROM keyledger.namespace_grants g WHERE g.role = current_user)));
DROP POLICY operations_namespace ON keyledger.operations;
CREATE POLICY operations_namespace ON keyledger.operations FOR ALL
  USING (target_namespace IN (SELECT g.namespace FROM keyledger.namespace_grants g WHERE g.role = current_user))
  WITH CHECK (target_namespace IN (SELECT g.namespace FROM keyledger.namespace_grants g WHERE g.role = current_user));
DROP FUNCTION keyledger.granted_namespaces();
CREATE OR REPLACE FUNCTION keyledger.acting_as_owner() RETURNS boolean LANGUAGE sql STABLE
  SET search_path = pg_catalog, pg_temp AS $$
  SELECT pg_has_role(current_user, c.relowner, 'USAGE') FROM pg_class c WHERE c.oid = 'keyledger.operations'::regclass
$$;

ALTER TABLE keyledger.records
  DROP CONSTRAINT records_step_check,
  ADD CONSTRAINT records_step_check CHECK (step ~ '^[a-z][a-z0-9-]{0,63}$'),
  DROP CONSTRAINT records_digest_check,
  ADD CONSTRAINT records_digest_check CHECK (digest = '' OR digest ~ '^sha256:[0-9a-f]{64}$'),
  DROP CONSTRAINT records_status_check,
  ADD CONSTRAINT records_status_check CHECK (status ~ '^[a-z0-9-]{0,64}$'),
  DROP CONSTRAINT records_reason_check,
  ADD CONSTRAINT records_reason_check CHECK (reason ~ '^[a-z0-9-]{0,64}$');
ALTER TABLE keyledger.operations
  DROP CONSTRAINT operations_kind_check,
  ADD CONSTRAINT operations_kind_check CHECK (kind ~ '^[A-Z][A-Za-z]{0,63}$'),
  DROP CONSTRAINT operations_mutation_id_check,
  ADD CONSTRAINT operations_mutation_id_check CHECK (mutation_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
  DROP CONSTRAINT operations_request_id_check,
  ADD CONSTRAINT operations_request_id_check CHECK (request_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
  DROP CONSTRAINT operations_command_digest_check,
  ADD CONSTRAINT operations_command_digest_check CHECK (command_digest ~ '^sha256:[0-9a-f]{64}$'),
  DROP CONSTRAINT operations_outcome_check,
  ADD CONSTRAINT operations_outcome_check CHECK (outcome ~ '^[a-z][a-z-]{0,63}$'),
  DROP CONSTRAINT operations_reason_check,
  ADD CONSTRAINT operations_reason_check CHECK (reason ~ '^[a-z0-9][a-z0-9-]{0,63}$');

DROP TRIGGER records_a_stamp ON keyledger.records;
CREATE TRIGGER records_a_stamp BEFORE INSERT ON keyledger.records
  FOR EACH ROW EXECUTE FUNCTION keyledger.stamp_row();
DROP TRIGGER operations_a_stamp ON keyledger.operations;
CREATE TRIGGER operations_a_stamp BEFORE INSERT ON keyledger.operations
  FOR EACH ROW EXECUTE FUNCTION keyledger.stamp_row();
CREATE TRIGGER operations_start_prepared BEFORE INSERT ON keyledger.operations
  FOR EACH ROW EXECUTE FUNCTION keyledger.guard_operation_insert();
DROP FUNCTION keyledger.stamp_record();
DROP FUNCTION keyledger.stamp_operation();

-- The journal: one row per operation, and an append-only list of records.
-- Every state the engine can be in, and every edge between two states, is
-- repeated here so that the database refuses what the Go code must never do.

CREATE TYPE keyledger.operation_state AS ENUM (
  'prepared',   -- the preparation is committed; nothing has been sent to the authority
  'calling',    -- an authority call is recorded and may have been sent; its answer is not recorded
  'answered',   -- the last call was applied as intended and recorded; more calls may follow
  'resolving',  -- the last call's outcome is unknown (lost, 409, 5xx); durable facts are being re-read
  'completed',  -- terminal: the operation's effect is confirmed in the authority
  'refused'     -- terminal: the engine failed closed; nothing further is sent
);

CREATE TYPE keyledger.record_kind AS ENUM (
  'preparation',       -- the command was accepted: its digest and target
  'observation',       -- what a read of the authority showed before deciding
  'authority_call',    -- a call about to be sent: attempt, preconditions, intended digest
  'authority_result',  -- what came back for the last call, or that it was lost
  'resolution',        -- what re-reading the durable facts showed after an unknown outcome
  'probe',             -- what a server answered to a credential probe
  'completion',        -- the operation ended with its effect confirmed
  'refusal'            -- the operation ended with a fail-closed decision
);

-- The only moves an operation's state may make (the same edges as workflow.Edges).
CREATE TABLE keyledger.state_edges (
  from_state keyledger.operation_state NOT NULL,
  to_state   keyledger.operation_state NOT NULL,
  PRIMARY KEY (from_state, to_state)
);
INSERT INTO keyledger.state_edges (from_state, to_state) VALUES
  ('prepared',  'calling'), ('prepared',  'completed'), ('prepared',  'refused'),
  ('calling',   'answered'), ('calling',  'resolving'), ('calling',   'completed'), ('calling', 'refused'),
  ('answered',  'calling'), ('answered',  'resolving'), ('answered',  'completed'), ('answered', 'refused'),
  ('resolving', 'calling'), ('resolving', 'answered'),  ('resolving', 'completed'), ('resolving', 'refused');

CREATE TABLE keyledger.operations (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind              text NOT NULL CHECK (kind ~ '^[A-Z][A-Za-z]{0,63}$'),
  mutation_id       text NOT NULL UNIQUE CHECK (mutation_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
  request_id        text NOT NULL CHECK (request_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
  command_digest    text NOT NULL CHECK (command_digest ~ '^sha256:[0-9a-f]{64}$'),
  target_namespace  text NOT NULL CHECK (char_length(target_namespace) BETWEEN 1 AND 63),
  target_name       text NOT NULL CHECK (char_length(target_name) BETWEEN 1 AND 253),
  expected_uid      text NOT NULL DEFAULT '',
  state             keyledger.operation_state NOT NULL DEFAULT 'prepared',
  -- bumped by every update: a move is a compare-and-set on (state, revision),
  -- so a process whose view went stale (even if the state came back to the
  -- same value) can never act on it
  revision          bigint NOT NULL DEFAULT 0 CHECK (revision >= 0),
  outcome           text CHECK (outcome ~ '^[a-z][a-z-]{0,63}$'),
  reason            text CHECK (reason ~ '^[a-z0-9][a-z0-9-]{0,63}$'),
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  finalized_at      timestamptz,
  CONSTRAINT operations_terminal_finalized CHECK (
    (state IN ('completed', 'refused')) = (finalized_at IS NOT NULL)),
  CONSTRAINT operations_terminal_outcome CHECK (
    (state IN ('completed', 'refused')) = (outcome IS NOT NULL)),
  CONSTRAINT operations_finalized_after_created CHECK (finalized_at IS NULL OR finalized_at >= created_at)
);
CREATE INDEX operations_created_at ON keyledger.operations (created_at DESC);

CREATE TABLE keyledger.records (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  operation_id      bigint NOT NULL REFERENCES keyledger.operations (id),
  kind              keyledger.record_kind NOT NULL,
  step              text NOT NULL CHECK (step ~ '^[a-z][a-z0-9-]{0,63}$'),
  -- the object a call acts on (kind/name), when a step acts on several
  target            text NOT NULL DEFAULT '' CHECK (char_length(target) <= 320),
  attempt           integer CHECK (attempt BETWEEN 1 AND 1000),
  uid               text NOT NULL DEFAULT '' CHECK (char_length(uid) <= 128),
  resource_version  text NOT NULL DEFAULT '' CHECK (char_length(resource_version) <= 128),
  digest            text NOT NULL DEFAULT '' CHECK (digest = '' OR digest ~ '^sha256:[0-9a-f]{64}$'),
  status            text NOT NULL DEFAULT '' CHECK (status ~ '^[a-z0-9-]{0,64}$'),
  reason            text NOT NULL DEFAULT '' CHECK (reason ~ '^[a-z0-9-]{0,64}$'),
  detail            jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(detail) = 'object'
                                                          AND octet_length(detail::text) <= 16384),
  created_at        timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT records_call_attempt CHECK ((kind = 'authority_call') = (attempt IS NOT NULL))
);
CREATE INDEX records_operation ON keyledger.records (operation_id, id);
-- At most one preparation, and one ending (completion or refusal), per operation.
CREATE UNIQUE INDEX records_one_preparation ON keyledger.records (operation_id) WHERE kind = 'preparation';
CREATE UNIQUE INDEX records_one_ending ON keyledger.records (operation_id) WHERE kind IN ('completion', 'refusal');
-- Two calls can never claim the same attempt of the same step.
CREATE UNIQUE INDEX records_one_call_per_attempt ON keyledger.records (operation_id, step, target, attempt) WHERE kind = 'authority_call';

-- Records are append-only, whoever asks (the schema owner included).
CREATE FUNCTION keyledger.refuse_record_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'keyledger journal records are append-only (% refused)', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER records_append_only BEFORE UPDATE OR DELETE ON keyledger.records
  FOR EACH ROW EXECUTE FUNCTION keyledger.refuse_record_change();
CREATE TRIGGER records_no_truncate BEFORE TRUNCATE ON keyledger.records
  FOR EACH STATEMENT EXECUTE FUNCTION keyledger.refuse_record_change();

-- An operation row only moves its state forward along state_edges; what it
-- was prepared for never changes, and it is never deleted.
CREATE FUNCTION keyledger.guard_operation_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'keyledger operations are never deleted' USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF (NEW.id, NEW.kind, NEW.mutation_id, NEW.request_id, NEW.command_digest, NEW.target_namespace,
      NEW.target_name, NEW.expected_uid, NEW.created_at)
     IS DISTINCT FROM
     (OLD.id, OLD.kind, OLD.mutation_id, OLD.request_id, OLD.command_digest, OLD.target_namespace,
      OLD.target_name, OLD.expected_uid, OLD.created_at) THEN
    RAISE EXCEPTION 'keyledger operation % : prepared fields are immutable', OLD.mutation_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF OLD.state IN ('completed', 'refused') THEN
    RAISE EXCEPTION 'keyledger operation % is final (%)', OLD.mutation_id, OLD.state
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF NEW.state <> OLD.state AND NOT EXISTS (
       SELECT 1 FROM keyledger.state_edges e WHERE e.from_state = OLD.state AND e.to_state = NEW.state) THEN
    RAISE EXCEPTION 'keyledger operation %: no edge % -> %', OLD.mutation_id, OLD.state, NEW.state
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.updated_at := now();
  NEW.revision := OLD.revision + 1;
  RETURN NEW;
END;
$$;
CREATE TRIGGER operations_forward_only BEFORE UPDATE OR DELETE ON keyledger.operations
  FOR EACH ROW EXECUTE FUNCTION keyledger.guard_operation_update();
CREATE TRIGGER operations_no_truncate BEFORE TRUNCATE ON keyledger.operations
  FOR EACH STATEMENT EXECUTE FUNCTION keyledger.refuse_record_change();
-- A new operation starts prepared, unfinished.
CREATE FUNCTION keyledger.guard_operation_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.state <> 'prepared' OR NEW.finalized_at IS NOT NULL OR NEW.outcome IS NOT NULL OR NEW.revision <> 0 THEN
    RAISE EXCEPTION 'keyledger operation % must start prepared', NEW.mutation_id USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER operations_start_prepared BEFORE INSERT ON keyledger.operations
  FOR EACH ROW EXECUTE FUNCTION keyledger.guard_operation_insert();

-- The operator role may read, append and move state forward; nothing else.
DO $$
DECLARE
  operator text := coalesce(nullif(current_setting('keyledger.operator_role', true), ''), 'keyledger_operator');
BEGIN
  -- Since migration 000005 a journal has no shared operator role: a fresh
  -- install need not declare one, and grants are per namespace role
  -- (keyledger journal grant). An existing journal's role keeps these
  -- rights until 000005 revokes them.
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = operator) THEN
    EXECUTE format('GRANT USAGE ON SCHEMA keyledger TO %I', operator);
    EXECUTE format('GRANT SELECT ON keyledger.state_edges TO %I', operator);
    EXECUTE format('GRANT SELECT, INSERT ON keyledger.operations, keyledger.records TO %I', operator);
    EXECUTE format('GRANT UPDATE (state, outcome, reason, finalized_at, updated_at) ON keyledger.operations TO %I', operator);
  END IF;
END;
$$;

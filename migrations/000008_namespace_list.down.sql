-- Back to migration 7: journal list reads operations_created_at only.
DROP FUNCTION keyledger.newest_in_namespace(text, bigint);
DROP INDEX keyledger.operations_namespace_created;

DROP INDEX IF EXISTS keyledger.operations_mutation_id_pattern;

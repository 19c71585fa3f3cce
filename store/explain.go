package store

// ReaderSQL is the SQL of the journal readers that must stay bounded as
// the journal grows (the newest run of a plan, one page of its runs, a
// target's step records, one page of journal list, an operation and its
// records by mutation ID as every run reads them), by name, with their $n
// parameters: tests, benchmarks and docs EXPLAIN them as they run.
func ReaderSQL() map[string]string {
	return map[string]string{
		"latest-run":   latestRunQuery,
		"runs-page":    runsPageQuery,
		"step-records": stepRecordsQuery,
		"runs-record":  findInRunsQuery,
		"list":         listQuery,
		"operation":    operationInQuery,
		"records":      recordsQuery,
	}
}

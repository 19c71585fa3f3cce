package keyring

// The two paths of Parse, for the test that they agree.
var (
	ParseCanonical = parseCanonical
	ParseStrict    = parseStrict
)

package suite

// APIRequest is one request keyledger sent through an apiRecorder, with
// what the real API server answered: the answer's kind and whether it
// carried data are read from a JSON answer; a protobuf answer (a whole
// object, as client-go asks for by default) has Kind "protobuf".
type APIRequest struct {
	Method, Path, Accept string
	Status               int
	ContentType          string
	Kind                 string
	HasData              bool
}

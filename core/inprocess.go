package core

// InProcessFetcher is implemented by adapters whose Fetch claims inside this process, without
// a round trip to a server (the memory adapter): what a Fetch costs is the node's own CPU, so
// the node's fetch loop lets the ready workers run before each turn and asks for every slot
// they freed in one Fetch, rather than one Fetch per freed slot. A remote backend does not
// implement it: the round trip of each Fetch already gathers the slots freed meanwhile, and
// delaying a Fetch would delay its request to the server. Called by NewNode, once, through
// FetchesInProcess.
type InProcessFetcher interface {
	// FetchesInProcess reports whether Fetch claims without leaving the process.
	FetchesInProcess() bool
}

// FetchesInProcess reports whether b (or the backend it wraps, looking through wrappers with an
// Unwrap() Backend method) is an InProcessFetcher whose FetchesInProcess returns true.
func FetchesInProcess(b Backend) bool {
	for range 16 { // wrappers nest a few levels at most; a cycle must not hang
		if f, ok := b.(InProcessFetcher); ok {
			return f.FetchesInProcess()
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			return false
		}
		b = u.Unwrap()
	}
	return false
}

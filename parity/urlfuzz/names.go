package urlfuzz

import (
	"regexp"
	"testing"
)

// ParamName is the naming scheme of every query parameter an adapter's URL parser consumes
// itself: txmq_ followed by a lower-case snake_case name (usually the Options field it sets).
// Parameters without the prefix belong to the SDK (redis://, postgres://) or are refused.
var ParamName = regexp.MustCompile(`^txmq_[a-z][a-z0-9_]*$`)

// CheckParamNames fails t for every accepted name that does not follow ParamName, and for
// every deprecated alias (old name -> current name) whose current name is not accepted or
// whose old name is itself a current one.
func CheckParamNames[V any](t testing.TB, accepted map[string]V, deprecated map[string]string) {
	t.Helper()
	if len(accepted) == 0 {
		t.Fatal("no accepted parameters")
	}
	for name := range accepted {
		if !ParamName.MatchString(name) {
			t.Errorf("parameter %q does not follow the scheme %s", name, ParamName)
		}
	}
	for old, current := range deprecated {
		if _, ok := accepted[current]; !ok {
			t.Errorf("deprecated parameter %q points at %q, which is not accepted", old, current)
		}
		if _, ok := accepted[old]; ok {
			t.Errorf("deprecated parameter %q is also a current one", old)
		}
	}
}

package all

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestAdapterDocSections: every adapter's package doc has the same sections, in the same
// order, so a reader comparing backends finds each answer in the same place.
func TestAdapterDocSections(t *testing.T) {
	want := []string{"URL and parameters", "Delivery semantics", "Ordering", "Limits", "Errors", "Cost"}
	heading := regexp.MustCompile(`(?m)^// # (.+)$`)
	for _, adapter := range []string{"memory", "sqljobs", "mysql", "sqlite", "redis", "sqs", "nats"} {
		src, err := os.ReadFile(filepath.Join("..", adapter, "doc.go"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range heading.FindAllStringSubmatch(string(src), -1) {
			got = append(got, m[1])
		}
		if !slices.Equal(got, want) {
			t.Errorf("adapters/%s/doc.go has the sections %q; want %q", adapter, got, want)
		}
	}
}

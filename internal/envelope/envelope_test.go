package envelope

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

func TestIDCount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{`[]`, 0, false},
		{`null`, 0, false},
		{`["a"]`, 1, false},
		{` [ "a" , "b" ] `, 2, false},
		{`["a,b","c"]`, 2, false},
		{`["a\"b","c"]`, 2, false},
		{`["a\\","b"]`, 2, false},
		{`["a\\\"]", "[", "]"]`, 3, false},
		{"[\n\t\"x\"\r\n]", 1, false},
		{`[1]`, 0, true},
		{`["a",null]`, 0, true},
		{`[["a"]]`, 0, true},
		{`{}`, 0, true},
		{`"a"`, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			var v struct {
				IDs IDList `json:"ids"`
			}
			err := json.Unmarshal([]byte(`{"ids":`+tt.in+`}`), &v)
			if (err != nil) != tt.wantErr || (err == nil && v.IDs.Len() != tt.want) {
				t.Fatalf("got %d, %v; want %d, error %v", v.IDs.Len(), err, tt.want, tt.wantErr)
			}
			var strs []string
			if err == nil && json.Unmarshal([]byte(tt.in), &strs) == nil && (len(strs) != v.IDs.Len() || fmt.Sprint(v.IDs.IDs()) != fmt.Sprint(strs) && len(strs) > 0) {
				t.Fatalf("counted %d (%q), encoding/json decodes %q", v.IDs.Len(), v.IDs.IDs(), strs)
			}
		})
	}
}

// TestIDListIDs: the ids decode as encoding/json decodes them, with or without escapes,
// whitespace and characters beyond ASCII.
func TestIDListIDs(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`["a","b","c"]`,
		`[ "a" , "" ,"0123456789abcdefghjkmnpqrs" ]`,
		`["ü-1","日本"]`,
		`["a\"b","c\\d","\u00e9"]`,
		`["x"]`,
		"[\"a\xffb\"]",
	} {
		var l IDList
		if err := l.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		var want []string
		_ = json.Unmarshal([]byte(raw), &want)
		if got := l.IDs(); !slices.Equal(got, want) || l.Len() != len(want) {
			t.Errorf("%s: IDs() = %q (Len %d); want %q", raw, got, l.Len(), want)
		}
	}
}

package txmq

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

type plainStruct struct {
	A int               `json:"a"`
	B []string          `json:"b"`
	C map[string]any    `json:"c"`
	D *plainStruct      `json:"d"`
	e chan int          // unexported: ignored by encoding/json
	F [3]byte           `json:"f"`
	G map[int]float64   `json:"g"`
	H any               `json:"h"`
	I json.Number       `json:"i"`
	J map[string][]bool `json:"j"`
}

type withTime struct {
	At time.Time `json:"at"`
}

type withError struct {
	Err error `json:"err"`
}

type Inner struct{ X int }

type embedsPointer struct {
	*Inner
}

type embedsValue struct {
	Inner
	Y int
}

type custom struct{}

func (custom) MarshalJSON() ([]byte, error) { return []byte(`1`), nil }

func TestRoundTripsPlainly(t *testing.T) {
	t.Parallel()
	_ = plainStruct{e: nil} // the unexported field exists only to be ignored
	tests := []struct {
		typ  reflect.Type
		want bool
	}{
		{reflect.TypeFor[int](), true},
		{reflect.TypeFor[string](), true},
		{reflect.TypeFor[any](), true},
		{reflect.TypeFor[plainStruct](), true},
		{reflect.TypeFor[embedsValue](), true},
		{reflect.TypeFor[[]map[string]*plainStruct](), true},
		{reflect.TypeFor[withTime](), false}, // custom marshalers: checked per value
		{reflect.TypeFor[withError](), false},
		{reflect.TypeFor[embedsPointer](), false},
		{reflect.TypeFor[custom](), false},
		{reflect.TypeFor[rejectsDecode](), false},
		{reflect.TypeFor[chan int](), false},
		{reflect.TypeFor[complex128](), false},
	}
	for _, tt := range tests {
		if got := roundTripsPlainly(tt.typ); got != tt.want {
			t.Errorf("%v: %v, want %v", tt.typ, got, tt.want)
		}
	}
}

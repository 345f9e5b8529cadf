package txmq

import (
	"encoding"
	"encoding/json"
	"reflect"
	"sync"
)

// plainTypes caches, per type, whether encoding/json decodes back whatever it encodes from that
// type. For such types a successful json.Marshal already proves the round trip, and publish skips
// the decode; every other type gets the full Marshal-then-Unmarshal check.
var plainTypes sync.Map // reflect.Type -> bool

var (
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// roundTripsPlainly reports whether t is built only from kinds whose JSON encoding/json always
// decodes back: no custom (un)marshalers anywhere, no non-empty interfaces, no embedded
// pointers. The answer is conservative: false means "check each value".
func roundTripsPlainly(t reflect.Type) bool {
	if v, ok := plainTypes.Load(t); ok {
		return v.(bool)
	}
	ok := plain(t, map[reflect.Type]bool{})
	plainTypes.Store(t, ok)
	return ok
}

func plain(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true // a recursive type: judged by its other parts
	}
	seen[t] = true
	pt := reflect.PointerTo(t)
	for _, i := range []reflect.Type{jsonMarshaler, jsonUnmarshaler, textMarshaler, textUnmarshaler} {
		if t.Implements(i) || pt.Implements(i) {
			return false
		}
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	case reflect.Interface:
		return t.NumMethod() == 0 // any decodes anything; other interfaces cannot be decoded into
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return plain(t.Elem(), seen)
	case reflect.Map:
		return plain(t.Key(), seen) && plain(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Pointer {
				return false
			}
			if !f.IsExported() && !f.Anonymous {
				continue // encoding/json ignores it both ways
			}
			if f.Tag.Get("json") == "-" {
				continue
			}
			if !plain(f.Type, seen) {
				return false
			}
		}
		return true
	}
	return false
}

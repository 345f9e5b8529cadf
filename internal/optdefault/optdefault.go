// Package optdefault fills the zero fields of an Options struct with their defaults and
// refuses negative ones, with one error text for every package that has such options.
package optdefault

import (
	"fmt"

	"github.com/txmq/txmq/core"
)

// Field is one numeric option: its name in Options, a pointer to its value and its default.
type Field[T ~int | ~int64] struct {
	Name string
	V    *T
	Def  T
}

// Fill sets every zero field to its default. A negative field is an error wrapping
// core.ErrInvalidConfig that names component, the field, its value and its default.
func Fill[T ~int | ~int64](component string, fields ...Field[T]) error {
	for _, f := range fields {
		if *f.V < 0 {
			return fmt.Errorf("%w: %s: Options.%s is %v; it must be >= 0 (0 means the default %v)", core.ErrInvalidConfig, component, f.Name, *f.V, f.Def)
		}
		if *f.V == 0 {
			*f.V = f.Def
		}
	}
	return nil
}

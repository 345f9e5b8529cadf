package core

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What adapters' URL openers share: the list of accepted parameters that an "unknown
// parameter" error shows, and the parsers of positive numbers. The errors name no parameter:
// the opener wraps them with the parameter and the backend (and ErrInvalidConfig).

// ParamNames returns the names of params, sorted and joined with ", ", for an error that lists
// the accepted parameters of a backend URL.
func ParamNames[V any](params map[string]V) string {
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// ParsePositiveDuration parses a positive Go duration such as 30s, a URL parameter's value.
func ParsePositiveDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, errors.New("not a Go duration such as 30s")
	case d <= 0:
		return 0, errors.New("must be positive")
	}
	return d, nil
}

// ParsePositiveInt parses a positive integer, a URL parameter's value.
func ParsePositiveInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return 0, errors.New("not an integer; want a positive integer")
	case n <= 0:
		return 0, errors.New("must be positive; want a positive integer")
	}
	return n, nil
}

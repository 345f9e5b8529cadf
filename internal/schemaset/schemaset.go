// Package schemaset gives the one PostgreSQL schema of an app's txmq tables (outbox, dead
// letters and, on a postgres:// backend, the jobs table), shared by txmq.Open and every txmq
// command so that the same settings put every table in the same schema.
//
// Precedence: the schema setting (TXMQ_SCHEMA, --schema) and a postgres:// backend URL's own
// txmq_schema parameter must agree when both are set (a conflict is an error naming both);
// when only one is set it applies to every table; when neither is, DefaultSchema does.
package schemaset

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/txmq/txmq/core"
)

// DefaultSchema is the schema used when neither the setting nor the URL names one.
const DefaultSchema = "txmq"

// param is the backend URL query parameter of the sqljobs adapter naming its schema.
const param = "txmq_schema"

// Names say how the caller's settings are spelt in errors (for example "TXMQ_SCHEMA" or
// "--schema").
type Names struct {
	// Schema names the schema setting.
	Schema string
	// Backend names the backend URL setting.
	Backend string
}

// Resolve returns the schema of every txmq table for the schema setting (may be empty) and
// the backend URL (may be empty), and the backend URL to open: a postgres:// or
// postgresql:// URL without txmq_schema gets the resolved schema added. A postgres URL
// whose txmq_schema differs from a non-empty schema is an error wrapping
// core.ErrInvalidConfig that names both settings. Other URLs are returned unchanged.
func Resolve(schema, backendURL string, n Names) (string, string, error) {
	schema = strings.TrimSpace(schema)
	u, fromURL, ok := urlSchema(backendURL)
	if !ok {
		if schema == "" {
			schema = DefaultSchema
		}
		return schema, backendURL, nil
	}
	switch {
	case schema != "" && fromURL != "" && schema != fromURL:
		return "", "", fmt.Errorf("%w: %s=%q and the %s parameter txmq_schema=%q name different schemas; txmq keeps every table of an app (outbox, dead letters, jobs) in one schema: remove one of them or make them equal",
			core.ErrInvalidConfig, n.Schema, schema, n.Backend, fromURL)
	case fromURL != "":
		return fromURL, backendURL, nil
	case schema == "":
		schema = DefaultSchema
	}
	q := u.Query()
	q.Set(param, schema)
	u.RawQuery = q.Encode()
	return schema, u.String(), nil
}

// ForDrain returns an old backend URL (one being drained) to open for the app's resolved
// schema: a postgres URL naming its own txmq_schema keeps it (an old backend may live
// elsewhere), one without gets schema, as the app's own backend URL would.
func ForDrain(schema, raw string) string {
	u, fromURL, ok := urlSchema(raw)
	if !ok || fromURL != "" {
		return raw
	}
	q := u.Query()
	q.Set(param, schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// urlSchema parses raw and reports whether it is a postgres URL, with its txmq_schema (the
// last one given, any key case, as the sqljobs adapter reads it).
func urlSchema(raw string) (*url.URL, string, bool) {
	if raw == "" {
		return nil, "", false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", false
	}
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql":
	default:
		return nil, "", false
	}
	var v string
	for key, vals := range u.Query() {
		if strings.EqualFold(key, param) && len(vals) > 0 {
			v = strings.TrimSpace(vals[len(vals)-1])
		}
	}
	return u, v, true
}

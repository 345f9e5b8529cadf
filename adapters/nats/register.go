package nats

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
)

// Scheme is the URL scheme this package registers with core.RegisterBackend.
const Scheme = "nats"

func init() { core.RegisterBackend(Scheme, Open) }

// urlParams are the query parameters Open accepts, each setting one Options field.
var urlParams = map[string]func(o *Options, v string) error{
	"txmq_prefix":   func(o *Options, v string) error { o.Prefix = v; return nil },
	"txmq_replicas": func(o *Options, v string) error { return atoi(v, &o.Replicas) },
	"txmq_storage": func(o *Options, v string) error {
		switch v {
		case "file":
			o.MemoryStorage = false
		case "memory":
			o.MemoryStorage = true
		default:
			return fmt.Errorf("want file or memory")
		}
		return nil
	},
	"txmq_max_age":         func(o *Options, v string) error { return duration(v, &o.MaxAge) },
	"txmq_ack_wait":        func(o *Options, v string) error { return duration(v, &o.AckWait) },
	"txmq_timeout":         func(o *Options, v string) error { return duration(v, &o.Timeout) },
	"txmq_idle_pull":       func(o *Options, v string) error { return duration(v, &o.IdlePull) },
	"txmq_max_ack_pending": func(o *Options, v string) error { return atoi(v, &o.MaxAckPending) },
	"txmq_partitions":      func(o *Options, v string) error { return atoi(v, &o.Partitions) },
	// txmq_fetch_limit set an option the node always overrode (its NodeOptions.FetchMax
	// decides): accepted for old URLs, checked and ignored.
	"txmq_fetch_limit": func(_ *Options, v string) error { var n int; return atoi(v, &n) },
	"txmq_name":        func(o *Options, v string) error { o.Name = v; return nil },
	"txmq_creds":       func(o *Options, v string) error { o.CredentialsFile = v; return nil },
	"txmq_nkey":        func(o *Options, v string) error { o.NKeySeedFile = v; return nil },
	"txmq_tls_ca":      func(o *Options, v string) error { o.RootCAFiles = append(o.RootCAFiles, v); return nil },
	"txmq_tls_cert":    func(o *Options, v string) error { o.ClientCertFile = v; return nil },
	"txmq_tls_key":     func(o *Options, v string) error { o.ClientKeyFile = v; return nil },
	"txmq_servers":     nil, // handled by Open
}

// Open opens a Backend from a URL, as core.OpenBackend does for TXMQ_BACKEND=nats://...:
//
//	nats://[user:password@]host:port[?txmq_prefix=app&txmq_replicas=3&...]
//
// The host (and user info, passed to the server as credentials and never logged) names the
// server to dial; a cluster is named by comma-separated hosts, nats://a:4222,b:4222,c:4222 (a
// list without ports means 4222 for each; give every host a port or none, as Go's URL parser
// requires; the user info applies to each), and txmq_servers adds more,
// comma separated (nats://b:4222,nats://c:4222). With a cluster, txmq_replicas=3 replicates
// every stream and consumer on three servers.
// Query parameters set Options: txmq_prefix, txmq_replicas, txmq_storage (file|memory),
// txmq_max_age, txmq_ack_wait, txmq_timeout, txmq_idle_pull (Go durations), txmq_max_ack_pending,
// txmq_partitions, txmq_fetch_limit, txmq_name, txmq_creds (a .creds file), txmq_nkey (an NKey seed file),
// txmq_tls_ca, txmq_tls_cert, txmq_tls_key (PEM files). Any other parameter is an error
// wrapping core.ErrInvalidConfig that lists the accepted ones.
func Open(_ context.Context, u *url.URL) (core.Backend, error) {
	opts, servers, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return New(servers, opts)
}

// parseURL returns the Options and the server list of a nats:// URL.
func parseURL(u *url.URL) (*Options, string, error) {
	if u.Host == "" {
		return nil, "", fmt.Errorf("%w: nats backend URL %s: no host; want nats://host:port", core.ErrInvalidConfig, core.RedactURL(u))
	}
	opts := &Options{}
	q := u.Query()
	keys := slices.Sorted(maps.Keys(q))
	for _, k := range keys {
		set, known := urlParams[k]
		if !known {
			return nil, "", fmt.Errorf("%w: nats backend URL %s: unknown parameter %q; accepted: %s", core.ErrInvalidConfig, core.RedactURL(u), k, core.ParamNames(urlParams))
		}
		if set == nil {
			continue
		}
		v := q.Get(k)
		if err := set(opts, v); err != nil {
			return nil, "", fmt.Errorf("%w: nats backend URL %s: parameter %s=%q: %v", core.ErrInvalidConfig, core.RedactURL(u), k, v, err)
		}
	}
	if _, err := opts.withDefaults(); err != nil {
		return nil, "", err
	}
	// nats://a:4222,b:4222,c or nats://a,b,c: one server per comma-separated host, each with
	// the URL's user info, the port 4222 when it names none.
	var servers []string
	for _, h := range strings.Split(u.Host, ",") {
		if h = strings.TrimSpace(h); h == "" {
			return nil, "", fmt.Errorf("%w: nats backend URL %s: an empty host in the server list; want nats://host1:port,host2:port", core.ErrInvalidConfig, core.RedactURL(u))
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), "4222")
		}
		s := url.URL{Scheme: "nats", User: u.User, Host: h}
		servers = append(servers, s.String())
	}
	if extra := q.Get("txmq_servers"); extra != "" {
		for _, s := range strings.Split(extra, ",") {
			if s = strings.TrimSpace(s); s != "" {
				servers = append(servers, s)
			}
		}
	}
	return opts, strings.Join(servers, ","), nil
}

// atoi sets *dst to v, a positive integer.
func atoi(v string, dst *int) (err error) {
	*dst, err = core.ParsePositiveInt(v)
	return err
}

// duration sets *dst to v, a positive Go duration.
func duration(v string, dst *time.Duration) (err error) {
	*dst, err = core.ParsePositiveDuration(v)
	return err
}

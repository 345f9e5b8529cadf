package redis

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

// URL schemes this package registers with core.RegisterBackend: plain TCP and TLS.
const (
	Scheme    = "redis"
	SchemeTLS = "rediss"
)

func init() {
	core.RegisterBackend(Scheme, Open)
	core.RegisterBackend(SchemeTLS, Open)
}

// urlParams are the txmq_ query parameters Open consumes, with what each sets.
var urlParams = map[string]func(o *Options, v string) error{
	"txmq_prefix": func(o *Options, v string) error {
		if v == "" {
			return fmt.Errorf("must not be empty")
		}
		o.Prefix = v
		return nil
	},
	"txmq_lease": func(o *Options, v string) error {
		d, err := positiveDuration(v)
		o.DefaultLease = d
		return err
	},
	"txmq_fetch_limit": func(o *Options, v string) error {
		n, err := strconv.Atoi(v)
		if err == nil && n <= 0 {
			err = fmt.Errorf("must be positive")
		}
		o.FetchLimit = n
		return err
	},
	"txmq_goredis_logs": func(o *Options, v string) error {
		b, err := strconv.ParseBool(v)
		o.GoRedisLogs = b
		return err
	},
	"txmq_call_timeout": func(o *Options, v string) error {
		d, err := positiveDuration(v)
		o.CallTimeout = d
		return err
	},
	"txmq_idle_recheck": func(o *Options, v string) error {
		d, err := positiveDuration(v)
		o.IdleRecheck = d
		return err
	},
}

// Open opens a Backend from a redis:// or rediss:// URL, as core.OpenBackend does for
// TXMQ_BACKEND=redis://...:
//
//	redis://[[user]:password@]host[:port][/db][?param=value...]
//	rediss://...   the same over TLS
//
// The connection part and the go-redis query parameters (dial_timeout, read_timeout,
// pool_size, max_retries, skip_verify, ...) are read by goredis.ParseURL. Parameters starting
// with txmq_ set Options: txmq_prefix (Prefix), txmq_lease (DefaultLease, a Go duration),
// txmq_fetch_limit (FetchLimit), txmq_call_timeout (CallTimeout), txmq_idle_recheck
// (IdleRecheck, a Go duration) and txmq_goredis_logs (GoRedisLogs, a Go bool); any other txmq_
// parameter is an error wrapping core.ErrInvalidConfig that lists the accepted ones. Errors
// never contain the password. Open does no I/O.
func Open(_ context.Context, u *url.URL) (core.Backend, error) {
	o, gopts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return newBackend(goredis.NewClient(gopts), true, o), nil
}

// parseURL returns the Options and the go-redis options a redis:// URL sets, without I/O.
func parseURL(u *url.URL) (Options, *goredis.Options, error) {
	var o Options
	q := u.Query()
	for key, vals := range q {
		if !strings.HasPrefix(key, "txmq_") {
			continue
		}
		set, ok := urlParams[key]
		if !ok {
			return Options{}, nil, fmt.Errorf("%w: redis backend URL %s: unknown parameter %q; accepted txmq_ parameters: %s (and the go-redis ones, such as dial_timeout or pool_size)", core.ErrInvalidConfig, core.RedactURL(u), key, strings.Join(paramNames(), ", "))
		}
		v := vals[len(vals)-1]
		if err := set(&o, v); err != nil {
			return Options{}, nil, fmt.Errorf("%w: redis backend URL %s: parameter %s=%q: %v", core.ErrInvalidConfig, core.RedactURL(u), key, v, err)
		}
		q.Del(key)
	}
	rest := *u
	rest.RawQuery = q.Encode()
	gopts, err := goredis.ParseURL(rest.String())
	if err != nil {
		return Options{}, nil, fmt.Errorf("%w: redis backend URL %s: %s", core.ErrInvalidConfig, core.RedactURL(u), core.RedactText(err.Error(), u.String()))
	}
	o2, err := o.withDefaults()
	if err != nil {
		return Options{}, nil, err
	}
	return o2, gopts, nil
}

// paramNames lists the accepted txmq_ parameters, sorted.
func paramNames() []string {
	names := make([]string, 0, len(urlParams))
	for k := range urlParams {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func positiveDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && d <= 0 {
		err = fmt.Errorf("must be positive")
	}
	return d, err
}

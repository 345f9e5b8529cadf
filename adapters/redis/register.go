package redis

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

// URL schemes this package registers with core.RegisterBackend: one server over plain TCP and
// TLS, and a Redis Cluster over plain TCP and TLS.
const (
	Scheme           = "redis"
	SchemeTLS        = "rediss"
	SchemeCluster    = "redis+cluster"
	SchemeClusterTLS = "rediss+cluster"
)

func init() { core.RegisterSchemes(Open, Scheme, SchemeTLS, SchemeCluster, SchemeClusterTLS) }

// urlParams are the txmq_ query parameters Open consumes, with what each sets.
var urlParams = map[string]func(o *Options, v string) error{
	"txmq_prefix": func(o *Options, v string) error {
		if v == "" {
			return fmt.Errorf("must not be empty")
		}
		o.Prefix = v
		return nil
	},
	// txmq_lease and txmq_fetch_limit set options the node always overrode (its
	// NodeOptions.Lease and FetchMax decide): accepted for old URLs, checked and ignored.
	"txmq_lease": func(_ *Options, v string) error {
		_, err := core.ParsePositiveDuration(v)
		return err
	},
	"txmq_fetch_limit": func(_ *Options, v string) error {
		_, err := core.ParsePositiveInt(v)
		return err
	},
	"txmq_goredis_logs": func(o *Options, v string) error {
		b, err := strconv.ParseBool(v)
		o.GoRedisLogs = b
		return err
	},
	"txmq_call_timeout": func(o *Options, v string) error {
		d, err := core.ParsePositiveDuration(v)
		o.CallTimeout = d
		return err
	},
	"txmq_idle_recheck": func(o *Options, v string) error {
		d, err := core.ParsePositiveDuration(v)
		o.IdleRecheck = d
		return err
	},
}

// Open opens a Backend from a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL,
// as core.OpenBackend does for TXMQ_BACKEND=redis://...:
//
//	redis://[[user]:password@]host[:port][/db][?param=value...]
//	rediss://...   the same over TLS
//	redis+cluster://[[user]:password@]host1[:port1],host2[:port2],...[/][?param=value...]
//	rediss+cluster://...   the same over TLS
//
// The connection part and the go-redis query parameters (dial_timeout, read_timeout,
// pool_size, max_retries, skip_verify, ...) are read by goredis.ParseURL. A redis+cluster URL
// names a Redis Cluster by one or more of its nodes (the seeds; the client discovers the rest,
// so one node is enough and more survive one being down), each as host:port (port 6379 when
// omitted from every host: Go's URL parser refuses a list whose last host alone lacks one), with the
// query parameters of goredis.ParseClusterURL (max_redirects, dial_timeout, pool_size (per
// node), ...); every txmq call is a script that writes, so it always runs on the master of its
// queue's slot. A cluster's database is 0, so a path other than / or /0
// is an error. It makes a goredis.ClusterClient (see Options.ClusterAddrs). Parameters starting
// with txmq_ set Options: txmq_prefix (Prefix), txmq_call_timeout (CallTimeout),
// txmq_idle_recheck (IdleRecheck, a Go duration) and txmq_goredis_logs (GoRedisLogs, a Go
// bool); txmq_lease and txmq_fetch_limit are accepted, checked and ignored (the node's lease and
// FetchMax decide); any other txmq_ parameter is an error wrapping core.ErrInvalidConfig that
// lists the accepted ones. Errors
// never contain the password. Open does no I/O.
func Open(_ context.Context, u *url.URL) (core.Backend, error) {
	if isClusterScheme(u.Scheme) {
		o, copts, err := parseClusterURL(u)
		if err != nil {
			return nil, err
		}
		return newBackend(goredis.NewClusterClient(copts), true, o), nil
	}
	o, gopts, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return newBackend(goredis.NewClient(gopts), true, o), nil
}

// isClusterScheme reports whether scheme names a Redis Cluster URL.
func isClusterScheme(scheme string) bool {
	s := strings.ToLower(scheme)
	return s == SchemeCluster || s == SchemeClusterTLS
}

// parseURL returns the Options and the go-redis options a redis:// URL sets, without I/O.
func parseURL(u *url.URL) (Options, *goredis.Options, error) {
	o, q, err := parseTxmqParams(u)
	if err != nil {
		return Options{}, nil, err
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

// parseClusterURL returns the Options and the go-redis cluster options a redis+cluster:// URL
// sets, without I/O: the comma-separated hosts become the seed addresses (and
// Options.ClusterAddrs), the rest goes to goredis.ParseClusterURL.
func parseClusterURL(u *url.URL) (Options, *goredis.ClusterOptions, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: redis cluster backend URL %s: %s", core.ErrInvalidConfig, core.RedactURL(u), fmt.Sprintf(format, a...))
	}
	o, q, err := parseTxmqParams(u)
	if err != nil {
		return Options{}, nil, err
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return Options{}, nil, bad("path %q selects database %s, but a Redis Cluster has database 0 only; end the URL with / or /0", u.Path, p)
	}
	if q.Has("addr") {
		return Options{}, nil, bad("name the cluster's nodes in the host part, separated by commas (redis+cluster://host1:port1,host2:port2/), not with addr parameters")
	}
	if u.Host == "" {
		return Options{}, nil, bad("no node; name at least one of the cluster's nodes: redis+cluster://host1:port1,host2:port2/")
	}
	var addrs []string
	for i, h := range strings.Split(u.Host, ",") {
		if h == "" {
			return Options{}, nil, bad("host %d is empty; list the cluster's nodes as host1:port1,host2:port2", i+1)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = h, "6379"
		}
		if host == "" {
			return Options{}, nil, bad("host %d (%q) has no host name; list the cluster's nodes as host1:port1,host2:port2", i+1, h)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return Options{}, nil, bad("host %d (%q) has an invalid port; list the cluster's nodes as host1:port1,host2:port2", i+1, h)
		}
		addrs = append(addrs, net.JoinHostPort(host, port))
	}
	// goredis.ParseClusterURL takes the first node in the host part and the others as addr
	// parameters; it knows only the redis and rediss schemes.
	scheme := Scheme
	if strings.EqualFold(u.Scheme, SchemeClusterTLS) {
		scheme = SchemeTLS
	}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	rest := url.URL{Scheme: scheme, User: u.User, Host: addrs[0], RawQuery: q.Encode()}
	copts, err := goredis.ParseClusterURL(rest.String())
	if err != nil {
		return Options{}, nil, bad("%s", core.RedactText(err.Error(), rest.String()))
	}
	o.ClusterAddrs = addrs
	o2, err := o.withDefaults()
	if err != nil {
		return Options{}, nil, err
	}
	return o2, copts, nil
}

// parseTxmqParams reads the txmq_ query parameters of u into Options (without defaults) and
// returns the other parameters, for go-redis.
func parseTxmqParams(u *url.URL) (Options, url.Values, error) {
	var o Options
	q := u.Query()
	for key, vals := range q {
		if !strings.HasPrefix(key, "txmq_") {
			continue
		}
		set, ok := urlParams[key]
		if !ok {
			return Options{}, nil, fmt.Errorf("%w: redis backend URL %s: unknown parameter %q; accepted txmq_ parameters: %s (and the go-redis ones, such as dial_timeout or pool_size)", core.ErrInvalidConfig, core.RedactURL(u), key, core.ParamNames(urlParams))
		}
		v := vals[len(vals)-1]
		if err := set(&o, v); err != nil {
			return Options{}, nil, fmt.Errorf("%w: redis backend URL %s: parameter %s=%q: %v", core.ErrInvalidConfig, core.RedactURL(u), key, v, err)
		}
		q.Del(key)
	}
	return o, q, nil
}

package redis

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
)

// Options configures a Backend. A nil *Options, and every zero field, means the default.
type Options struct {
	// Client, when set, is the Redis client to use (a *goredis.Client, a *goredis.ClusterClient
	// or any goredis.UniversalClient); the connection fields below (Addr to MaxRetries) are then
	// ignored, and Close does not close it: its owner does. Default nil: the Backend makes its
	// own client from the fields below and closes it on Close.
	Client goredis.UniversalClient

	// Addr is the server's host:port. Default "127.0.0.1:6379".
	Addr string
	// ClusterAddrs, when not empty, makes the Backend talk to a Redis Cluster: it makes a
	// goredis.ClusterClient seeded with these host:port addresses (any of the cluster's nodes;
	// the client discovers the others and follows slot moves and failovers), and Addr and DB
	// are ignored (a cluster has database 0 only). Every script and pipeline of one queue stays
	// in the slot of the queue's hash tag (see keys.go). The redis+cluster:// URL sets it.
	// Default nil: one server at Addr.
	ClusterAddrs []string
	// Username is the ACL user name (Redis 6+). Default "": the default user.
	Username string
	// Password is the ACL user's password, or the requirepass password when Username is
	// empty. Default "": no AUTH. It never appears in errors or logs.
	Password string
	// DB is the logical database. Default 0.
	DB int
	// TLS, when set, makes the client speak TLS with this configuration (the rediss:// scheme
	// sets it). Default nil: plain TCP.
	TLS *tls.Config
	// DialTimeout bounds connecting to the server. Default 5s.
	DialTimeout time.Duration
	// ReadTimeout bounds waiting for a reply. Default 3s.
	ReadTimeout time.Duration
	// WriteTimeout bounds sending a command. Default 3s.
	WriteTimeout time.Duration
	// PoolSize is the most connections the client opens (to each node, on a cluster). Default
	// 10 per GOMAXPROCS (the go-redis default).
	PoolSize int
	// MaxRetries is how many times the client retries a command that failed on the network.
	// Default 3; negative disables retries. Retrying is safe: a publish of a stored id is
	// ignored, a repeated settle finds its token gone (ErrLeaseLost, never a double effect),
	// and a claim whose reply was lost only leaves its batches to come back after their lease.
	MaxRetries int

	// Prefix starts every key name, so several apps or tests can share one Redis. It must not
	// contain '{' or '}' (it goes inside the keys' hash tag). Default "txmq".
	Prefix string

	// IdleRecheck is how long a queue whose claim found nothing pending goes without another
	// claim script from this Backend's waiting fetches, unless a wake-up (Pub/Sub) arrives for
	// it or its subscription breaks; a queue with a delayed batch or a lease in flight is
	// looked at again when that comes due, whichever is first. It bounds what a lost wake-up
	// can delay a batch, and sets the idle cost: each node runs one claim script (six
	// commands) per idle queue per IdleRecheck, so 1,000 idle queues cost about 200 commands/s
	// at the default. Fetches that do not wait (Wait 0) always claim every queue. Default 30s.
	IdleRecheck time.Duration

	// CallTimeout bounds each claim pipeline, which runs detached from the caller's
	// cancellation so that a claim Redis already made is always returned. Default 10s.
	CallTimeout time.Duration

	// MaxBatchBytes is the largest batch body the server accepts: its proto-max-bulk-len (a
	// batch travels as one bulk argument). A larger batch is refused with an error wrapping
	// core.ErrRejected before it is sent, and core's nodes refuse larger messages at the
	// publish call (the Backend implements core.SizeLimiter). Default 0: read from the server
	// (CONFIG GET proto-max-bulk-len) at the first publish, and again when a large publish
	// fails on the network; 512 MB (Redis's default) until then, or when CONFIG is not allowed.
	MaxBatchBytes int

	// Logger receives the adapter's own diagnostics (the wake-up subscription losing its
	// connection), at Debug and Warn level. Default slog.Default().
	Logger *slog.Logger

	// GoRedisLogs, when true, routes go-redis's own log lines (such as "connection pool:
	// failed to dial after 1 attempts" while Redis is unreachable, which go-redis otherwise
	// prints to stderr) to Logger at Debug level; txmq already reports the same failures as
	// errors wrapping core.ErrBackendUnavailable, which core logs. go-redis has one logger per
	// process, not one per client, so this calls goredis.SetLogger: it is process-wide. It
	// takes the lines of every go-redis client in the process (to the Logger of the last
	// Backend opened with GoRedisLogs) and replaces a logger the app set with
	// goredis.SetLogger before New (one it sets after New stays). To silence go-redis, set
	// GoRedisLogs with a Logger that discards Debug. Default false: go-redis's global logger
	// is left alone. The URL parameter txmq_goredis_logs=true sets it.
	GoRedisLogs bool
}

const (
	// DefaultPrefix is the key prefix used when Options.Prefix is empty.
	DefaultPrefix      = "txmq"
	defaultAddr        = "127.0.0.1:6379"
	defaultCallTimeout = 10 * time.Second
	defaultIdleRecheck = 30 * time.Second
)

// withDefaults returns a copy of o (nil allowed) with every zero field set to its default, or
// an error wrapping core.ErrInvalidConfig.
func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Addr == "" {
		c.Addr = defaultAddr
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	for i, a := range c.ClusterAddrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return c, fmt.Errorf("%w: redis: ClusterAddrs[%d] is %q: %v; give each cluster node as host:port", core.ErrInvalidConfig, i, a, err)
		}
	}
	if strings.ContainsAny(c.Prefix, "{}") {
		return c, fmt.Errorf("%w: redis: Prefix %q contains '{' or '}'; key names put the prefix inside a {hash tag}, so pick a prefix without braces", core.ErrInvalidConfig, c.Prefix)
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = defaultCallTimeout
	}
	if c.IdleRecheck <= 0 {
		c.IdleRecheck = defaultIdleRecheck
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxBatchBytes < 0 {
		return c, fmt.Errorf("%w: redis: MaxBatchBytes is %d; use the server's proto-max-bulk-len in bytes, or 0 to read it from the server", core.ErrInvalidConfig, c.MaxBatchBytes)
	}
	return c, nil
}

// newClient makes the go-redis client of a Backend that makes its own: a cluster client when
// ClusterAddrs is set, else a single-server client.
func (o *Options) newClient() goredis.UniversalClient {
	if len(o.ClusterAddrs) > 0 {
		return goredis.NewClusterClient(o.clusterOptions())
	}
	return goredis.NewClient(o.clientOptions())
}

// clusterOptions builds the go-redis cluster options of a Backend that makes its own client.
func (o *Options) clusterOptions() *goredis.ClusterOptions {
	return &goredis.ClusterOptions{
		Addrs:        o.ClusterAddrs,
		Username:     o.Username,
		Password:     o.Password,
		TLSConfig:    o.TLS,
		DialTimeout:  o.DialTimeout,
		ReadTimeout:  o.ReadTimeout,
		WriteTimeout: o.WriteTimeout,
		PoolSize:     o.PoolSize,
		MaxRetries:   o.MaxRetries,
	}
}

// clientOptions builds the go-redis options of a Backend that makes its own client.
func (o *Options) clientOptions() *goredis.Options {
	return &goredis.Options{
		Addr:         o.Addr,
		Username:     o.Username,
		Password:     o.Password,
		DB:           o.DB,
		TLSConfig:    o.TLS,
		DialTimeout:  o.DialTimeout,
		ReadTimeout:  o.ReadTimeout,
		WriteTimeout: o.WriteTimeout,
		PoolSize:     o.PoolSize,
		MaxRetries:   o.MaxRetries,
	}
}

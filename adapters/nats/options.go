package nats

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/core"
)

// Options configures a Backend. A nil *Options, and every zero field, means the default
// documented on the field.
type Options struct {
	// Prefix namespaces everything the Backend creates: queue q lives in the stream
	// "<Prefix>_<q>" with subjects "<Prefix>.<q>.>". Letters, digits, '-' and '_', at most 32.
	// Backends that should share work use the same Prefix. Default "txmq".
	Prefix string

	// Replicas is the number of stream and consumer replicas (1, 3 or 5 in a cluster).
	// Default 1.
	Replicas int

	// MemoryStorage keeps streams in server memory instead of on disk: faster, but batches are
	// lost when the server restarts. Default false (file storage).
	MemoryStorage bool

	// MaxAge discards batches older than this, whatever their state (a safety net against a
	// forgotten queue filling the disk; a discarded batch is lost without a dead letter).
	// Default 0: batches are kept until settled.
	MaxAge time.Duration

	// AckWait is the least lease of every claim: a queue's consumer gets an AckWait of at
	// least this and at least the request's Lease (core's NodeOptions.Lease). An existing consumer with a shorter AckWait is updated; a longer one
	// is kept, because lowering it would shorten leases other clients hold. Default 0: the
	// request's Lease alone.
	AckWait time.Duration

	// MaxAckPending caps the claimed (unacked) batches of a non-exclusive queue across all
	// nodes; Exclusive queues always use 1. Default 10000.
	MaxAckPending int

	// Partitions is the number of key partitions of an Ordered queue's stream (see "Ordering"
	// in the package doc): keyed batches are hashed by key onto this many subjects, each with
	// its own consumer that has one batch in flight at a time, so it is how many keys of one
	// queue can run at once, cluster-wide. It applies when a client creates the stream; the
	// stream keeps it (in its metadata) and every client uses the stream's value, so clients
	// with different settings still agree. 1 to 1024. Default 8.
	Partitions int

	// IdlePull is how long the pull request of an idle queue (one whose last pull delivered
	// nothing) waits on the server, across the node's Fetch calls, instead of ending with the
	// Fetch's wait: a publish is still delivered at once through the waiting pull, and the
	// next Fetch calls join it instead of sending their own. It is capped at a quarter of the
	// queue's AckWait (a batch delivered at the end of a pull still has three quarters of its
	// lease) and is never shorter than the Fetch's wait. Each node sends about
	// 3600s / min(IdlePull, AckWait/4) pull requests per idle queue per hour: 480 at the
	// default 30s lease (3,600 with one pull per 1s poll wait before). Default 30s.
	IdlePull time.Duration

	// Timeout bounds each JetStream API call, publish and acknowledgement. Default 5s.
	Timeout time.Duration

	// LeaseMargin is how close to the end of its lease a claim may still be settled or
	// extended: within the margin the Backend refuses with core.ErrLeaseLost rather than risk
	// settling a batch the server is redelivering to another node (JetStream itself accepts
	// an acknowledgement from a previous holder). Default: a tenth of the lease, at most
	// 250ms.
	LeaseMargin time.Duration

	// ChunkSize is the largest body stored in one message; larger bodies are split into
	// chunks. Default: the server's max_payload minus 8 KiB for headers.
	ChunkSize int

	// Logger receives warnings about best-effort cleanups (orphan chunks). Default: discard.
	Logger *slog.Logger

	// Connection settings, used when the Backend dials (New, Open); ignored by NewWithConn.

	// Name is the client connection name shown in server monitoring. Default "txmq".
	Name string
	// CredentialsFile is a NATS .creds file (user JWT and NKey seed). Default none.
	CredentialsFile string
	// NKeySeedFile is a file holding an NKey seed for NKey authentication. Default none.
	NKeySeedFile string
	// TLSConfig enables TLS with this configuration. Default none (TLS only if the URL says
	// tls:// or the server requires it).
	TLSConfig *tls.Config
	// RootCAFiles are PEM files of CAs that sign the server certificate. Default none.
	RootCAFiles []string
	// ClientCertFile and ClientKeyFile are a client certificate for mutual TLS. Default none.
	ClientCertFile, ClientKeyFile string
	// ReconnectWait is the pause between reconnect attempts. Default 250ms. The client
	// reconnects forever; while disconnected, calls fail at once with
	// core.ErrBackendUnavailable instead of being buffered.
	ReconnectWait time.Duration
	// ExtraOptions are appended to the connection options, last wins. Default none.
	ExtraOptions []natsgo.Option
}

const (
	defaultPrefix        = "txmq"
	defaultMaxAckPending = 10000
	defaultTimeout       = 5 * time.Second
	defaultReconnectWait = 250 * time.Millisecond
	defaultIdlePull      = 30 * time.Second
	defaultPartitions    = 8
	maxPartitions        = 1024
	maxLeaseMargin       = 250 * time.Millisecond
	chunkHeadroom        = 8 << 10
)

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// withDefaults returns a copy of o (nil allowed) with every zero field set, or an error
// wrapping core.ErrInvalidConfig.
func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Prefix == "" {
		c.Prefix = defaultPrefix
	}
	if !prefixRE.MatchString(c.Prefix) {
		return c, fmt.Errorf("%w: nats: Prefix %q must be 1 to 32 letters, digits, '-' or '_'", core.ErrInvalidConfig, c.Prefix)
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		return c, fmt.Errorf("%w: nats: Replicas %d must be between 1 and 5", core.ErrInvalidConfig, c.Replicas)
	}
	if c.MaxAge < 0 || c.AckWait < 0 || c.Timeout < 0 || c.LeaseMargin < 0 || c.ReconnectWait < 0 || c.IdlePull < 0 {
		return c, fmt.Errorf("%w: nats: durations in Options must not be negative", core.ErrInvalidConfig)
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = defaultMaxAckPending
	}
	if c.Partitions == 0 {
		c.Partitions = defaultPartitions
	}
	if c.Partitions < 0 || c.Partitions > maxPartitions {
		return c, fmt.Errorf("%w: nats: Partitions %d must be between 1 and %d", core.ErrInvalidConfig, c.Partitions, maxPartitions)
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.ReconnectWait == 0 {
		c.ReconnectWait = defaultReconnectWait
	}
	if c.IdlePull == 0 {
		c.IdlePull = defaultIdlePull
	}
	if c.Name == "" {
		c.Name = "txmq"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ChunkSize < 0 {
		return c, fmt.Errorf("%w: nats: ChunkSize %d must not be negative", core.ErrInvalidConfig, c.ChunkSize)
	}
	return c, nil
}

// storage returns the JetStream storage type.
func (o *Options) storage() jetstream.StorageType {
	if o.MemoryStorage {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// connOptions returns the nats.go connection options; secrets stay in files or TLS configs and
// are never logged.
func (o *Options) connOptions() []natsgo.Option {
	opts := []natsgo.Option{
		natsgo.Name(o.Name),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(o.ReconnectWait),
		natsgo.ReconnectJitter(o.ReconnectWait/5, o.ReconnectWait/5),
		// Fail at once while disconnected instead of buffering: a buffered ack or publish
		// would report success before the server has it.
		natsgo.ReconnectBufSize(-1),
		natsgo.Timeout(o.Timeout),
		natsgo.RetryOnFailedConnect(false),
	}
	if o.CredentialsFile != "" {
		opts = append(opts, natsgo.UserCredentials(o.CredentialsFile))
	}
	if o.NKeySeedFile != "" {
		if opt, err := natsgo.NkeyOptionFromSeed(o.NKeySeedFile); err == nil {
			opts = append(opts, opt)
		} else {
			opts = append(opts, func(*natsgo.Options) error {
				return fmt.Errorf("%w: nats: NKey seed file: %v", core.ErrInvalidConfig, err)
			})
		}
	}
	if o.TLSConfig != nil {
		opts = append(opts, natsgo.Secure(o.TLSConfig))
	}
	if len(o.RootCAFiles) > 0 {
		opts = append(opts, natsgo.RootCAs(o.RootCAFiles...))
	}
	if o.ClientCertFile != "" || o.ClientKeyFile != "" {
		opts = append(opts, natsgo.ClientCert(o.ClientCertFile, o.ClientKeyFile))
	}
	return append(opts, o.ExtraOptions...)
}

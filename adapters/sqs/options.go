package sqs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/txmq/txmq/core"
)

// Options configures a Backend. A nil *Options, and every zero field, means the default
// documented on the field.
type Options struct {
	// Client is an SQS client to use as is. When set, Region, Endpoint, Credentials,
	// HTTPClient and RetryMaxAttempts are ignored. Default: one is built from those fields.
	Client *awssqs.Client

	// Region is the AWS region. Default: the region of the AWS config chain (AWS_REGION,
	// ~/.aws/config), or "us-east-1" when Credentials is set and no region is given.
	Region string

	// Endpoint overrides the SQS endpoint URL (an emulator such as fauxqs, a VPC endpoint).
	// Default: the region's public endpoint.
	Endpoint string

	// Credentials is the credentials provider. Default: nil, meaning the normal AWS config
	// chain (environment, shared files, SSO, IMDS/ECS roles) via config.LoadDefaultConfig.
	// When set, the config chain is not consulted at all (tests use static credentials).
	Credentials aws.CredentialsProvider

	// HTTPClient sends the SDK's requests (to count or trace them). Default: the SDK's.
	HTTPClient awssqs.HTTPClient

	// RetryMaxAttempts is the SDK's attempt budget per call. Default 0: the SDK's (3).
	// Tests use 1 or 2 so that an outage surfaces quickly.
	RetryMaxAttempts int

	// Prefix is put before every txmq queue name to form the SQS queue name. Default "txmq-".
	// Queue names are then Prefix+queue (standard), Prefix+queue+".fifo" (Exclusive queues)
	// and Prefix+queue+"-Delayed" (the holding queue for long delays); SQS names are at most
	// 80 characters.
	Prefix string

	// MaxNativeDelay is the longest delay handed to SQS's DelaySeconds; longer delays go
	// through the holding queue. Default and maximum 15 min (SQS's cap); tests set a few
	// seconds to exercise the long-delay path quickly. Values under 2 s are raised to 2 s.
	MaxNativeDelay time.Duration

	// MaxMessageBytes is the largest SQS message (body plus attributes) the adapter sends.
	// Default 256 KiB, SQS's classic limit (raise it to 1 MiB where your queues allow it).
	// Larger batches are gzip-compressed, then, if still too large, stored in Overflow.
	MaxMessageBytes int

	// Overflow stores batch bodies too large for one SQS message even after compression
	// (the SQS Extended Client pattern); the message then carries the key. Default nil: such
	// a batch is split by messages into batches that fit, and a single message that does not
	// fit alone fails its Publish with an error wrapping core.ErrRejected. Use a store every
	// node can read (NewDirOverflow on a shared volume, or your own S3-backed implementation).
	Overflow Overflow

	// IdleWait is the long-poll wait (WaitTimeSeconds) of a receive on a queue whose last
	// receive returned nothing, whatever the node's PollWait: the receive outlives a shorter
	// Fetch (what it gets goes to the next one) and returns as soon as a message arrives, so
	// pickup stays immediate while an idle queue costs each node 3600s/IdleWait receives an
	// hour (180 at the default; an Exclusive queue twice that, its holding queue being
	// long-polled too; a standard queue adds a short poll of its holding queue every third of
	// MaxNativeDelay, 12 an hour at the default). SQS bills every receive. Whole seconds from
	// 1 s to 20 s (SQS's cap); a Fetch whose own wait is longer uses that. Default 20 s.
	IdleWait time.Duration

	// RequestTimeout bounds each SQS call made without a caller deadline (background polls,
	// releases at Close), on top of the long-poll wait. Default 10 s.
	RequestTimeout time.Duration

	// Logger receives the adapter's warnings (failed background releases and the like).
	// Default slog.Default().
	Logger *slog.Logger
}

// Defaults.
const (
	// DefaultPrefix is the default SQS queue-name prefix.
	DefaultPrefix = "txmq-"
	// DefaultMaxNativeDelay is SQS's DelaySeconds cap.
	DefaultMaxNativeDelay = 15 * time.Minute
	// DefaultMaxMessageBytes is SQS's classic message size limit.
	DefaultMaxMessageBytes = 256 << 10
	// MaxVisibility is SQS's longest visibility timeout (12 h).
	MaxVisibility = 12 * time.Hour

	defaultRequestTimeout = 10 * time.Second
	defaultRegion         = "us-east-1"
	minNativeDelay        = 2 * time.Second
	minMessageBytes       = 1 << 10
)

// withDefaults returns a copy of opts (nil allowed) with every default applied.
func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.MaxNativeDelay <= 0 || c.MaxNativeDelay > DefaultMaxNativeDelay {
		c.MaxNativeDelay = DefaultMaxNativeDelay
	}
	c.MaxNativeDelay = max(c.MaxNativeDelay, minNativeDelay)
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	c.MaxMessageBytes = max(c.MaxMessageBytes, minMessageBytes)
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	if c.IdleWait <= 0 || c.IdleWait > maxWait {
		c.IdleWait = maxWait
	}
	c.IdleWait = max(c.IdleWait.Round(time.Second), time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate checks the options that can be wrong.
func (o *Options) validate() error {
	if !validPrefix(o.Prefix) {
		return fmt.Errorf("%w: sqs: Options.Prefix %q: use letters, digits, '-' and '_' only (SQS queue names), at most 40 characters", core.ErrInvalidConfig, o.Prefix)
	}
	return nil
}

func validPrefix(p string) bool {
	if len(p) > 40 {
		return false
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// buildClient returns the SQS client described by o: o.Client as is; a client from explicit
// options when Credentials is set (no config chain); else the AWS config chain.
func buildClient(ctx context.Context, o *Options) (*awssqs.Client, error) {
	if o.Client != nil {
		return o.Client, nil
	}
	apply := func(so *awssqs.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		if o.HTTPClient != nil {
			so.HTTPClient = o.HTTPClient
		}
		if o.RetryMaxAttempts > 0 {
			so.RetryMaxAttempts = o.RetryMaxAttempts
		}
	}
	if o.Credentials != nil {
		region := o.Region
		if region == "" {
			region = defaultRegion
		}
		so := awssqs.Options{Region: region, Credentials: o.Credentials}
		apply(&so)
		return awssqs.New(so), nil
	}
	var lo []func(*config.LoadOptions) error
	if o.Region != "" {
		lo = append(lo, config.WithRegion(o.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, fmt.Errorf("%w: sqs: loading the AWS config chain (set Options.Credentials or Options.Client to skip it): %v", core.ErrInvalidConfig, err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("%w: sqs: no AWS region: set Options.Region (or the txmq_region URL parameter, or AWS_REGION)", core.ErrInvalidConfig)
	}
	return awssqs.NewFromConfig(cfg, apply), nil
}

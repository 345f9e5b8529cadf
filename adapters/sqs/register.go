package sqs

import (
	"context"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/txmq/txmq/core"
)

// Schemes this package registers with core.RegisterBackend.
const (
	Scheme    = "sqs"
	SchemeAlt = "awssqs"
)

func init() { core.RegisterSchemes(Open, Scheme, SchemeAlt) }

// urlParams are the query parameters Open accepts, with what they set.
var urlParams = map[string]string{
	"txmq_region":             "Options.Region",
	"txmq_endpoint":           "Options.Endpoint",
	"txmq_prefix":             "Options.Prefix",
	"txmq_max_native_delay":   "Options.MaxNativeDelay (a Go duration)",
	"txmq_max_message_bytes":  "Options.MaxMessageBytes",
	"txmq_overflow_dir":       "Options.Overflow = NewDirOverflow(dir)",
	"txmq_retry_max_attempts": "Options.RetryMaxAttempts",
	"txmq_request_timeout":    "Options.RequestTimeout (a Go duration)",
	"txmq_idle_wait":          "Options.IdleWait (a Go duration)",
}

// Open opens a Backend from a URL, as core.OpenBackend does for TXMQ_BACKEND=sqs://...
//
//	sqs://                                   the AWS config chain decides everything
//	sqs://eu-west-1?txmq_prefix=shop-        region as the host
//	awssqs://KEY:SECRET@us-east-1?txmq_endpoint=http://127.0.0.1:4566
//
// The host, when present, is the region. User and password, when present, are static
// credentials (for emulators; in production leave them out and let the AWS config chain find
// credentials); they never appear in errors or logs. Query parameters (all prefixed txmq_, so
// they cannot clash with anything else) set Options: txmq_region, txmq_endpoint, txmq_prefix,
// txmq_max_native_delay, txmq_max_message_bytes, txmq_overflow_dir, txmq_retry_max_attempts,
// txmq_request_timeout, txmq_idle_wait. An unknown parameter is an error wrapping core.ErrInvalidConfig.
func Open(ctx context.Context, u *url.URL) (core.Backend, error) {
	opts, err := optionsFromURL(u)
	if err != nil {
		return nil, err
	}
	return New(ctx, opts)
}

func optionsFromURL(u *url.URL) (*Options, error) {
	o := &Options{Region: u.Hostname()}
	if u.User != nil {
		secret, _ := u.User.Password()
		o.Credentials = credentials.NewStaticCredentialsProvider(u.User.Username(), secret, "")
	}
	bad := func(key, v string, why string) error {
		return fmt.Errorf("%w: sqs backend URL: parameter %s=%q: %s", core.ErrInvalidConfig, key, v, why)
	}
	for key, vals := range u.Query() {
		v := vals[len(vals)-1]
		switch key {
		case "txmq_region":
			o.Region = v
		case "txmq_endpoint":
			if p, err := url.Parse(v); err != nil || p.Scheme == "" || p.Host == "" {
				return nil, bad(key, v, "want an absolute URL such as http://127.0.0.1:4566")
			}
			o.Endpoint = v
		case "txmq_prefix":
			o.Prefix = v
		case "txmq_max_native_delay", "txmq_request_timeout", "txmq_idle_wait":
			d, err := core.ParsePositiveDuration(v)
			if err != nil {
				return nil, bad(key, v, err.Error())
			}
			switch key {
			case "txmq_request_timeout":
				o.RequestTimeout = d
			case "txmq_idle_wait":
				o.IdleWait = d
			default:
				o.MaxNativeDelay = d
			}
		case "txmq_max_message_bytes", "txmq_retry_max_attempts":
			n, err := core.ParsePositiveInt(v)
			if err != nil {
				return nil, bad(key, v, err.Error())
			}
			if key == "txmq_max_message_bytes" {
				o.MaxMessageBytes = n
			} else {
				o.RetryMaxAttempts = n
			}
		case "txmq_overflow_dir":
			ov, err := NewDirOverflow(v)
			if err != nil {
				return nil, bad(key, v, err.Error())
			}
			o.Overflow = ov
		default:
			return nil, fmt.Errorf("%w: sqs backend URL: unknown parameter %q; accepted: %s", core.ErrInvalidConfig, key, core.ParamNames(urlParams))
		}
	}
	return o, nil
}

package sqlurl

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
)

// Settings are what the shared parameters set. A zero duration means the parameter was not
// given (the adapter's default applies).
type Settings struct {
	// Schema is txmq_schema; empty: not given.
	Schema string
	// Migrate is txmq_migrate; true when not given.
	Migrate bool
	// QueryTimeout is txmq_query_timeout.
	QueryTimeout time.Duration
	// AbandonedAfter is txmq_abandoned_after.
	AbandonedAfter time.Duration
	// ReapInterval is txmq_reap_interval; negative turns the reaper off.
	ReapInterval time.Duration
	// PollInterval is txmq_poll_interval.
	PollInterval time.Duration
}

// Take removes every parameter starting with txmq_ (case-insensitively) from q and returns
// what they set. txmq_lease and txmq_fetch_limit are checked and ignored: a node's
// NodeOptions decide them. name prefixes errors ("mysql", "sqljobs"); accepted lists the
// adapter's parameters in the error for an unknown one, so an adapter takes its own
// parameters out of q before calling Take. Errors wrap core.ErrInvalidConfig and name the
// parameter.
func Take(name string, q url.Values, accepted map[string]string) (Settings, error) {
	s := Settings{Migrate: true}
	bad := func(key, v string, err error) error {
		return fmt.Errorf("%w: %s: backend URL parameter %s=%q: %v", core.ErrInvalidConfig, name, key, v, err)
	}
	duration := func(key, v string, allowNegative bool) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err == nil && d == 0 || err == nil && d < 0 && !allowNegative {
			err = fmt.Errorf("must be positive")
		}
		if err != nil {
			return 0, bad(key, v, err)
		}
		return d, nil
	}
	for key, vals := range q {
		if !strings.HasPrefix(strings.ToLower(key), "txmq_") {
			continue
		}
		v := vals[len(vals)-1]
		var err error
		switch strings.ToLower(key) {
		case "txmq_schema":
			s.Schema = v
		case "txmq_migrate":
			if s.Migrate, err = strconv.ParseBool(v); err != nil {
				err = bad(key, v, fmt.Errorf("use true or false"))
			}
		case "txmq_lease": // accepted like the other adapters' URLs, checked and ignored
			_, err = duration(key, v, false)
		case "txmq_query_timeout":
			s.QueryTimeout, err = duration(key, v, false)
		case "txmq_abandoned_after":
			s.AbandonedAfter, err = duration(key, v, false)
		case "txmq_reap_interval":
			s.ReapInterval, err = duration(key, v, true)
		case "txmq_poll_interval":
			s.PollInterval, err = duration(key, v, false)
		case "txmq_fetch_limit": // accepted like the other adapters' URLs, checked and ignored
			if _, err = core.ParsePositiveInt(v); err != nil {
				err = bad(key, v, err)
			}
		default:
			return Settings{}, fmt.Errorf("%w: %s: backend URL: unknown parameter %q; accepted txmq_ parameters: %s", core.ErrInvalidConfig, name, key, core.ParamNames(accepted))
		}
		if err != nil {
			return Settings{}, err
		}
		q.Del(key)
	}
	return s, nil
}

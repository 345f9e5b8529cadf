package txmq

import (
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/engine"
)

// Registry holds queue declarations. Most apps use DefaultRegistry through Declare; tests use a
// fresh registry each (see coretest) so that declarations do not leak between them.
type Registry struct {
	mu        sync.Mutex
	queues    map[string]*queueSpec
	schedules map[string]*scheduleSpec
}

// DefaultRegistry is the process-wide registry used when a node's options name none.
var DefaultRegistry = NewRegistry()

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{queues: make(map[string]*queueSpec)} }

// Names returns the declared queue names, sorted.
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.queues))
}

// lookup returns the declaration of name, or nil.
func (r *Registry) lookup(name string) *queueSpec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queues[name]
}

// declKey is the comparable part of a declaration; funcs are compared only by being set,
// because Go funcs cannot be compared. Two declarations are the same when they come from the
// same source line and have equal keys.
type declKey struct {
	typ            string
	tx             Transactional
	exclusive      bool
	ordered        bool
	capN           int
	capFunc        bool
	maxBatch       int
	maxAttempts    int
	maxMsgBytes    int
	maxBatchBytes  int
	dedup, onError bool
	backoff        bool
	classify       bool
	rate           RateLimit
	idWindow       time.Duration
	runTimeout     time.Duration
	runGrace       time.Duration
	runMW, pubMW   int // how many middleware (funcs cannot be compared)
	prioritized    bool
	prioAging      time.Duration
	prioDefault    int
	fair           bool
	clusterLimit   int
	keyLimit       int
	maxSnoozes     int
	unique         Unique
}

// queueSpec is a declared queue: the engine's untyped view (engine.Spec) and what only the
// app API uses (where it was declared, its typed handle).
type queueSpec struct {
	engine.Spec
	site string
	key  declKey
	reg  *Registry
	tx   Transactional
	conc Concurrency
	// typed is the *Queue[T] handed out for this declaration.
	typed any
	// uniqueByPayload: a unique queue keys a message without UniqueKey by its JSON's hash.
	uniqueByPayload bool
	// runMW and publishMW are the queue's middleware (QueueConfig).
	runMW     []RunMiddleware
	publishMW []PublishMiddleware
}

// Declare declares a typed queue in DefaultRegistry and returns its handle; the queue's type
// comes from cfg (QueueConfig[Email]{...} declares a queue of Email). The config is validated
// now. Declaring the same name again from the same source line with the same settings returns
// the same queue; any other second declaration is an error naming both places.
func Declare[T any](name string, cfg QueueConfig[T]) (*Queue[T], error) {
	return declare(nil, name, cfg, 1)
}

// MustDeclare is Declare that panics on error, for package-level declarations:
//
//	var Emails = txmq.MustDeclare("emails", txmq.QueueConfig[Email]{Transactional: txmq.Try})
func MustDeclare[T any](name string, cfg QueueConfig[T]) *Queue[T] {
	q, err := declare(nil, name, cfg, 1)
	if err != nil {
		panic(err)
	}
	return q
}

// DeclareIn is Declare in reg instead of DefaultRegistry (reg nil means DefaultRegistry): tests
// use a fresh registry each so that declarations do not leak between them, and give it to their
// nodes in NodeOptions.Registry.
func DeclareIn[T any](reg *Registry, name string, cfg QueueConfig[T]) (*Queue[T], error) {
	return declare(reg, name, cfg, 1)
}

// MustDeclareIn is DeclareIn that panics on error.
func MustDeclareIn[T any](reg *Registry, name string, cfg QueueConfig[T]) *Queue[T] {
	q, err := declare(reg, name, cfg, 1)
	if err != nil {
		panic(err)
	}
	return q
}

func declare[T any](reg *Registry, name string, cfg QueueConfig[T], skip int) (*Queue[T], error) {
	if reg == nil {
		reg = DefaultRegistry
	}
	if err := cfg.validate(name); err != nil {
		return nil, err
	}
	site := "unknown place"
	if _, file, line, ok := runtime.Caller(skip + 1); ok {
		site = fmt.Sprintf("%s:%d", file, line)
	}
	if cfg.MaxBatchMessages == 0 {
		cfg.MaxBatchMessages = DefaultMaxBatchMessages
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.MaxSnoozes == 0 {
		cfg.MaxSnoozes = DefaultMaxSnoozes
	}
	cfg.RunTimeout, cfg.RunTimeoutGrace = runTimeoutDefaults(cfg.RunTimeout, cfg.RunTimeoutGrace)
	key := declKey{
		typ:           reflect.TypeFor[T]().String(),
		tx:            cfg.Transactional,
		exclusive:     cfg.Exclusive,
		ordered:       cfg.Ordered,
		capN:          cfg.MaxConcurrentBatches.n,
		capFunc:       cfg.MaxConcurrentBatches.fn != nil,
		maxBatch:      cfg.MaxBatchMessages,
		maxAttempts:   cfg.MaxAttempts,
		maxMsgBytes:   cfg.MaxMessageBytes,
		maxBatchBytes: cfg.MaxBatchBytes,
		dedup:         cfg.Dedup != nil,
		onError:       cfg.OnError != nil,
		backoff:       cfg.Backoff != nil,
		classify:      cfg.ClassifyError != nil,
		rate:          cfg.RateLimit,
		idWindow:      cfg.IDDedupWindow,
		runTimeout:    cfg.RunTimeout,
		runGrace:      cfg.RunTimeoutGrace,
		runMW:         len(cfg.RunMiddleware),
		pubMW:         len(cfg.PublishMiddleware),
		prioritized:   cfg.Prioritized,
		prioAging:     cfg.PriorityAging,
		prioDefault:   cfg.DefaultPriority,
		fair:          cfg.Fair,
		clusterLimit:  cfg.ClusterLimit,
		keyLimit:      cfg.KeyLimit,
		maxSnoozes:    cfg.MaxSnoozes,
		unique:        cfg.Unique,
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if prev, ok := reg.queues[name]; ok {
		if prev.site == site && prev.key == key {
			if q, ok := prev.typed.(*Queue[T]); ok {
				return q, nil
			}
		}
		if prev.site != site {
			return nil, fmt.Errorf("%w: queue %q is declared twice, at %s and at %s: declare each queue once (in a package-level var) and share the handle", core.ErrInvalidConfig, name, prev.site, site)
		}
		return nil, fmt.Errorf("%w: queue %q is declared again at %s with different settings (%+v before, %+v now); a queue has one declaration", core.ErrInvalidConfig, name, site, prev.key, key)
	}
	spec := &queueSpec{site: site, key: key, reg: reg, tx: cfg.Transactional, conc: cfg.MaxConcurrentBatches,
		runMW: slices.Clone(cfg.RunMiddleware), publishMW: slices.Clone(cfg.PublishMiddleware),
		Spec: engine.Spec{
			Name:            name,
			Declared:        registrySpecs{reg},
			Routing:         engine.Routing(cfg.Transactional),
			Exclusive:       cfg.Exclusive,
			Ordered:         cfg.Ordered,
			Prioritized:     cfg.Prioritized,
			PriorityAging:   priorityAging(cfg.Prioritized, cfg.PriorityAging),
			DefaultPriority: cfg.DefaultPriority,
			Fair:            cfg.Fair,
			ClusterLimit:    cfg.ClusterLimit,
			KeyLimit:        cfg.KeyLimit,
			MaxBatch:        cfg.MaxBatchMessages,
			MaxAttempts:     cfg.MaxAttempts,
			MaxMessageBytes: cfg.MaxMessageBytes,
			MaxBatchBytes:   cfg.MaxBatchBytes,
			Rate:            rateDefaults(cfg.RateLimit),
			IDWindow:        cfg.IDDedupWindow,
			Unique:          core.Unique{Mode: cfg.Unique.Mode, Window: cfg.Unique.Window},
			RunTimeout:      max(cfg.RunTimeout, 0),
			RunGrace:        cfg.RunTimeoutGrace,
			Backoff:         cfg.Backoff,
			ClassifyError:   cfg.ClassifyError,
			MaxSnoozes:      cfg.MaxSnoozes,
		}}
	if cfg.MaxConcurrentBatches.isSet() {
		spec.Cap = cfg.MaxConcurrentBatches.limit
	}
	if cfg.Dedup != nil {
		spec.Dedup = typedDedup(name, cfg.Dedup)
	}
	q := &Queue[T]{spec: spec, onError: cfg.OnError}
	spec.typed = q
	spec.uniqueByPayload = cfg.Unique.ByPayload
	reg.queues[name] = spec
	return q, nil
}

// Package backendtest holds the small helpers the SQL adapters' own tests share (package
// sqljobs, adapters/mysql, adapters/sqlite): publishing numbered batches, a fetch with no
// wait, a queue's free slots and its depth, each failing the test on an error. It drives a
// core.Backend only; what opens an adapter's backend stays in its tests.
package backendtest

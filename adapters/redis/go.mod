module github.com/txmq/txmq/adapters/redis

go 1.26.0

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/txmq/txmq v0.0.0-00010101000000-000000000000
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.12.0 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

// While the modules are developed together (go.work), each module also replaces the
// txmq modules it requires by their directories in this repository, so that a build
// with GOWORK=off and go mod tidy resolve them too (see "Modules" in docs/guide.md).
replace github.com/txmq/txmq => ../..

module github.com/txmq/txmq/cmd/txmq

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.10.2
	github.com/jackc/pgx/v5 v5.12.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/txmq/txmq v0.0.0-00010101000000-000000000000
	github.com/txmq/txmq/adapters/all v0.0.0-00010101000000-000000000000
	github.com/txmq/txmq/adapters/mysql v0.0.0-00010101000000-000000000000
	github.com/txmq/txmq/adapters/sqlite v0.0.0-00010101000000-000000000000
	golang.org/x/term v0.47.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/aws/aws-sdk-go-v2 v1.48.0 // indirect
	github.com/aws/aws-sdk-go-v2/config v1.33.18 // indirect
	github.com/aws/aws-sdk-go-v2/credentials v1.21.0 // indirect
	github.com/aws/aws-sdk-go-v2/feature/ec2/imds v1.20.9 // indirect
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/v4a v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/accept-encoding v1.13.25 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/presigned-url v1.14.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/signin v1.13.1 // indirect
	github.com/aws/aws-sdk-go-v2/service/sqs v1.53.0 // indirect
	github.com/aws/aws-sdk-go-v2/service/sso v1.39.5 // indirect
	github.com/aws/aws-sdk-go-v2/service/ssooidc v1.44.5 // indirect
	github.com/aws/aws-sdk-go-v2/service/sts v1.52.0 // indirect
	github.com/aws/smithy-go v1.28.9 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/nats-io/nats.go v1.55.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/txmq/txmq/adapters/nats v0.0.0-00010101000000-000000000000 // indirect
	github.com/txmq/txmq/adapters/redis v0.0.0-00010101000000-000000000000 // indirect
	github.com/txmq/txmq/adapters/sqs v0.0.0-00010101000000-000000000000 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	modernc.org/libc v1.80.1 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
	modernc.org/sqlite v1.62.0 // indirect
)

// While the modules are developed together (go.work), each module also replaces the
// txmq modules it requires by their directories in this repository, so that a build
// with GOWORK=off and go mod tidy resolve them too (see "Modules" in docs/guide.md).
replace (
	github.com/txmq/txmq => ../..
	github.com/txmq/txmq/adapters/all => ../../adapters/all
	github.com/txmq/txmq/adapters/mysql => ../../adapters/mysql
	github.com/txmq/txmq/adapters/nats => ../../adapters/nats
	github.com/txmq/txmq/adapters/redis => ../../adapters/redis
	github.com/txmq/txmq/adapters/sqs => ../../adapters/sqs
)

replace github.com/txmq/txmq/adapters/sqlite => ../../adapters/sqlite

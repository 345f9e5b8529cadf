package mysql

import (
	"os"
	"strings"
)

// envURL is TXMQ_MYSQL_URL, trimmed; empty when unset.
func envURL() string { return strings.TrimSpace(os.Getenv("TXMQ_MYSQL_URL")) }

package sqs

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/txmq/txmq/core"
)

// SQS's Depths are approximate: the adapter must say so, or the drain wrapper trusts two
// lagging zero readings.
func TestDepthsDeclaredApproximate(t *testing.T) {
	t.Parallel()
	be, err := New(context.Background(), &Options{
		Region: "us-east-1", Endpoint: "http://127.0.0.1:1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if got := core.DepthsSettle(be); got < time.Minute {
		t.Fatalf("core.DepthsSettle(sqs backend) = %v; want at least a minute (SQS's counts lag)", got)
	}
}

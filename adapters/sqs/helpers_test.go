package sqs

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/txmq/txmq/txmqtest/testenv"
)

// testCap is the MaxNativeDelay of the tests: long delays take seconds, not 15 minutes.
const testCap = 2 * time.Second

// space is one test's namespace on the SQS emulator: a unique prefix, queues deleted at the
// end, and a proxy in front of the emulator for outage tests.
type space struct {
	t        testing.TB
	endpoint string
	prefix   string
	proxy    *testenv.Proxy
	overflow Overflow
}

func newSpace(t testing.TB) *space {
	t.Helper()
	endpoint := testenv.SQSEndpoint(t)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatalf("endpoint %q: %v", endpoint, err)
	}
	s := &space{t: t, endpoint: endpoint, prefix: testenv.UniqueName("t") + "-"}
	ov, err := NewDirOverflow(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.overflow = ov
	t.Cleanup(s.deleteQueues) // registered first: runs after the clients are closed
	s.proxy = testenv.NewProxy(t, u.Host)
	return s
}

// options returns the options of a test client of s (through the proxy), with o's non-zero
// fields on top.
func (s *space) options(o *Options) *Options {
	c := Options{}
	if o != nil {
		c = *o
	}
	if c.Endpoint == "" {
		c.Endpoint = "http://" + s.proxy.Addr()
	}
	c.Region = "us-east-1"
	c.Credentials = credentials.NewStaticCredentialsProvider("test", "test", "")
	if c.Prefix == "" {
		c.Prefix = s.prefix
	}
	if c.MaxNativeDelay == 0 {
		c.MaxNativeDelay = testCap
	}
	if c.Overflow == nil {
		c.Overflow = s.overflow
	}
	if c.RetryMaxAttempts == 0 {
		c.RetryMaxAttempts = 2
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	return &c
}

// client returns a new Backend of s, closed in t.Cleanup.
func (s *space) client(t testing.TB, o *Options) *Backend {
	t.Helper()
	be, err := New(context.Background(), s.options(o))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

// direct returns a plain SQS client on the emulator, bypassing the proxy.
func (s *space) direct() *awssqs.Client {
	return awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}

// deleteQueues deletes every SQS queue of the namespace.
func (s *space) deleteQueues() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := s.direct()
	out, err := c.ListQueues(ctx, &awssqs.ListQueuesInput{QueueNamePrefix: aws.String(s.prefix), MaxResults: aws.Int32(1000)})
	if err != nil {
		s.t.Logf("cleanup: listing queues %s*: %v", s.prefix, err)
		return
	}
	for _, u := range out.QueueUrls {
		if _, err := c.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
			s.t.Logf("cleanup: deleting %s: %v", u, err)
		}
	}
}

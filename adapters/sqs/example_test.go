package sqs_test

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/sqs"
)

// New uses Amazon SQS: region and credentials come from the AWS config chain unless Options
// give them (here, static credentials for a local emulator). It needs SQS, so this example has
// no output line: go test compiles it but does not run it. (By setting instead:
// TXMQ_BACKEND=sqs://eu-west-1?txmq_prefix=shop-, with the package imported.)
func ExampleNew() {
	ctx := context.Background()
	be, err := sqs.New(ctx, &sqs.Options{
		Prefix:      "shop-",
		Region:      "us-east-1",
		Endpoint:    "http://127.0.0.1:4566",                                      // an emulator; leave empty for AWS
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), // leave nil for the AWS chain
	})
	if err != nil {
		log.Fatal(err)
	}
	defer be.Close()

	node, err := txmq.NewNode(be, nil) // PollWait defaults to SQS's 20 s long poll here
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)
	// Listen, then node.Start(ctx), as on any backend.
}

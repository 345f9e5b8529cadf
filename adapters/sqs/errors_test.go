package sqs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/txmq/txmq/core"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	op := func(err error) error {
		return &smithy.OperationError{ServiceID: "SQS", OperationName: "SendMessage", Err: err}
	}
	status := func(code int, err error) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: err}
	}
	api := func(code, msg string) error { return &smithy.GenericAPIError{Code: code, Message: msg} }
	tests := []struct {
		name string
		err  error
		want errorClass
	}{
		{"throttled type", op(&types.RequestThrottled{}), classUnavailable},
		{"throttling code", op(status(400, api("ThrottlingException", "Rate exceeded"))), classUnavailable},
		{"kms throttled", op(&types.KmsThrottled{}), classUnavailable},
		{"over limit", op(&types.OverLimit{}), classUnavailable},
		{"503", op(status(503, api("ServiceUnavailable", ""))), classUnavailable},
		{"500 unknown code", op(status(500, api("Whatever", ""))), classUnavailable},
		{"429", op(status(429, errors.New("slow down"))), classUnavailable},
		{"internal error code", op(api("InternalError", "")), classUnavailable},
		{"connection refused", op(&smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}), classUnavailable},
		{"connection reset", op(fmt.Errorf("read: %w", syscall.ECONNRESET)), classUnavailable},
		{"eof", op(&smithyhttp.RequestSendError{Err: io.EOF}), classUnavailable},
		{"timeout", op(context.DeadlineExceeded), classUnavailable},
		{"dns", op(&net.DNSError{Err: "no such host", Name: "sqs.example"}), classUnavailable},
		{"retries exhausted", &retry.MaxAttemptsError{Attempt: 2, Err: errors.New("boom")}, classUnavailable},
		{"queue does not exist type", op(&types.QueueDoesNotExist{}), classNoQueue},
		{"queue does not exist query code", op(status(400, api("AWS.SimpleQueueService.NonExistentQueue", ""))), classNoQueue},
		{"access denied", op(status(403, api("AccessDenied", "not authorized"))), classOther},
		{"validation", op(status(400, api("ValidationError", "bad"))), classOther},
		{"invalid contents", op(status(400, api("AWS.SimpleQueueService.InvalidMessageContents", ""))), classRejected},
		{"invalid contents json code", op(status(400, api("InvalidMessageContents", "invalid characters"))), classRejected},
		{"message too long", op(status(400, api("InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be shorter than 262144 bytes."))), classRejected},
		{"plain error", errors.New("something else"), classOther},
		{"receipt handle invalid", op(&types.ReceiptHandleIsInvalid{}), classStaleHandle},
		{"not in flight", op(&types.MessageNotInflight{}), classStaleHandle},
		{"expired handle", op(status(400, api("InvalidParameterValue", "Value x for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."))), classStaleHandle},
		{"message too long, query code", op(status(400, api("AWS.SimpleQueueService.InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be shorter than 1048576 bytes."))), classRejected},
		{"expired handle, query code", op(status(400, api("AWS.SimpleQueueService.InvalidParameterValue", "The receipt handle has expired."))), classStaleHandle},
		{"413 too large", op(status(413, errors.New("request entity too large"))), classRejected},
		{"other invalid parameter", op(status(400, api("InvalidParameterValue", "DelaySeconds too big"))), classRejected},
		{"canceled", op(context.Canceled), classCanceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Fatalf("classify(%v) = %d; want %d", tc.err, got, tc.want)
			}
			werr := wrap("send", "q", tc.err)
			if unavail := errors.Is(werr, core.ErrBackendUnavailable); unavail != (tc.want == classUnavailable) {
				t.Fatalf("wrap(%v) unavailable=%v; want %v", tc.err, unavail, tc.want == classUnavailable)
			}
			if rej := errors.Is(werr, core.ErrRejected); rej != (tc.want == classRejected) {
				t.Fatalf("wrap(%v) rejected=%v; want %v", tc.err, rej, tc.want == classRejected)
			}
			if !errors.Is(werr, tc.err) {
				t.Fatalf("wrap lost the SDK error from the chain: %v", werr)
			}
			c := &core.Claim{Queue: "q", ID: "b"}
			if lost := errors.Is(wrapSettle("ack", c, tc.err), core.ErrLeaseLost); lost != (tc.want == classStaleHandle) {
				t.Fatalf("wrapSettle(%v) lease lost=%v; want %v", tc.err, lost, tc.want == classStaleHandle)
			}
		})
	}
	if wrap("x", "q", nil) != nil || wrapSettle("x", nil, nil) != nil {
		t.Fatal("wrapping nil must give nil")
	}
}

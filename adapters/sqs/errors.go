package sqs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/txmq/txmq/core"
)

// This file is the one place where SDK errors are classified. Every call to SQS goes through
// wrap (or wrapSettle for calls that present a receipt handle), so "is this an outage?" and
// "is this lease gone?" are answered the same way everywhere.

// errorClass is what an SDK error means to txmq.
type errorClass int

const (
	// classOther is a permanent or caller error (bad input, missing queue, access denied):
	// retrying it as such will not help, so it does not wrap core.ErrBackendUnavailable.
	classOther errorClass = iota
	// classUnavailable is an outage or overload that should pass: throttling, 5xx, connection
	// errors, timeouts. It wraps core.ErrBackendUnavailable.
	classUnavailable
	// classStaleHandle is SQS refusing a receipt handle: the message was received again by
	// someone else (or deleted). On settles and extensions it wraps core.ErrLeaseLost.
	classStaleHandle
	// classNoQueue is QueueDoesNotExist: the cached queue URL must be forgotten.
	classNoQueue
	// classCanceled is the caller's own context ending.
	classCanceled
	// classRejected is SQS refusing the message itself (invalid characters, a parameter value
	// such as its size out of range): sending it again can never succeed. It wraps
	// core.ErrRejected, so the batch is dead-lettered rather than retried.
	classRejected
)

// unavailableCodes are error codes (from the AWS JSON protocol or the query protocol) that mean
// "try again later".
var unavailableCodes = map[string]bool{
	"RequestThrottled":            true,
	"ThrottlingException":         true,
	"Throttling":                  true,
	"ThrottledException":          true,
	"TooManyRequestsException":    true,
	"RequestLimitExceeded":        true,
	"KmsThrottled":                true,
	"ServiceUnavailable":          true,
	"ServiceUnavailableException": true,
	"InternalError":               true,
	"InternalFailure":             true,
	"InternalServerError":         true,
	"RequestTimeout":              true,
	"RequestTimeoutException":     true,
	"PriorRequestNotComplete":     true,
	"EC2ThrottledException":       true,
	"SlowDown":                    true,
}

// rejectedCodes are the errors SQS returns for a message it will never accept as sent (an
// InvalidParameterValue about a receipt handle is a stale handle instead).
var rejectedCodes = map[string]bool{
	"InvalidMessageContents":                        true,
	"AWS.SimpleQueueService.InvalidMessageContents": true,
	"InvalidParameterValue":                         true,
	"AWS.SimpleQueueService.InvalidParameterValue":  true, // fauxqs, and SQS's query protocol
	"MessageTooLong":                                true,
	"AWS.SimpleQueueService.MessageTooLong":         true,
}

// staleCodes are the errors SQS returns for a receipt handle that is no longer current.
var staleCodes = map[string]bool{
	"ReceiptHandleIsInvalid":                    true,
	"MessageNotInflight":                        true,
	"AWS.SimpleQueueService.MessageNotInflight": true,
	"InvalidReceiptHandle":                      true,
}

// classify tells what err means to txmq. It looks through the SDK's retry wrapper, smithy
// operation errors and net errors.
func classify(err error) errorClass {
	if err == nil {
		return classOther
	}
	var (
		noQueue *types.QueueDoesNotExist
		stale   *types.ReceiptHandleIsInvalid
		notIn   *types.MessageNotInflight
		thr     *types.RequestThrottled
		over    *types.OverLimit
		kms     *types.KmsThrottled
	)
	switch {
	case errors.As(err, &noQueue):
		return classNoQueue
	case errors.As(err, &stale), errors.As(err, &notIn):
		return classStaleHandle
	case errors.As(err, &thr), errors.As(err, &kms):
		return classUnavailable
	case errors.As(err, &over):
		// OverLimit is the in-flight message cap (120,000 standard / 20,000 FIFO): it passes
		// as soon as consumers settle.
		return classUnavailable
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		code := api.ErrorCode()
		switch {
		case code == "AWS.SimpleQueueService.NonExistentQueue" || code == "QueueDoesNotExist":
			return classNoQueue
		case staleCodes[code]:
			return classStaleHandle
		case (code == "InvalidParameterValue" || code == "AWS.SimpleQueueService.InvalidParameterValue") && mentionsReceiptHandle(api.ErrorMessage()):
			// SQS answers ChangeMessageVisibility on a handle from an earlier receive with
			// InvalidParameterValue "... receipt handle ... has expired".
			return classStaleHandle
		case unavailableCodes[code]:
			return classUnavailable
		case rejectedCodes[code]:
			return classRejected
		}
	}
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) && resp.HTTPStatusCode() != 0 {
		if s := resp.HTTPStatusCode(); s >= 500 || s == 429 {
			return classUnavailable
		} else if s == 413 { // Request Entity Too Large: a proxy or endpoint refusing the size
			return classRejected
		}
		return classOther
	}
	if errors.Is(err, context.Canceled) {
		return classCanceled
	}
	var maxAttempts *retry.MaxAttemptsError
	switch {
	case errors.Is(err, context.DeadlineExceeded), core.ConnectionLost(err):
		return classUnavailable
	case errors.As(err, &maxAttempts):
		// Retries exhausted on something the SDK thought retryable.
		return classUnavailable
	}
	// The SDK wraps transport failures it could not type in a RequestSendError.
	var send *smithyhttp.RequestSendError
	if errors.As(err, &send) {
		return classUnavailable
	}
	return classOther
}

func mentionsReceiptHandle(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "receipt handle") || strings.Contains(m, "receipthandle")
}

// wrap turns an SDK error of op on queue into a txmq error: outages wrap
// core.ErrBackendUnavailable; everything else keeps the SDK error in its chain.
func wrap(op, queue string, err error) error {
	if err == nil {
		return nil
	}
	where := op
	if queue != "" {
		where = fmt.Sprintf("%s (queue %q)", op, queue)
	}
	switch classify(err) {
	case classUnavailable:
		return fmt.Errorf("sqs: %s: SQS unreachable or throttling; the call can be retried later: %w: %w", where, core.ErrBackendUnavailable, err)
	case classNoQueue:
		return fmt.Errorf("sqs: %s: the SQS queue does not exist (deleted outside txmq?); it is created again on next use: %w", where, err)
	case classCanceled:
		return fmt.Errorf("sqs: %s: %w", where, err)
	case classRejected:
		return fmt.Errorf("sqs: %s: SQS refused the message itself; sending it again cannot succeed: %w: %w", where, core.ErrRejected, err)
	default:
		return fmt.Errorf("sqs: %s: SQS refused the request (check the queue name, IAM permissions and options): %w", where, err)
	}
}

// wrapSettle is wrap for calls that present a receipt handle: a stale handle means the lease
// was lost.
func wrapSettle(op string, c *core.Claim, err error) error {
	if err == nil {
		return nil
	}
	if classify(err) == classStaleHandle {
		return fmt.Errorf("sqs: %s %s: SQS no longer accepts the receipt handle (the visibility timeout ran out and the batch may already run elsewhere): %w: %w", op, c.String(), core.ErrLeaseLost, err)
	}
	return wrap(op+" "+c.String(), "", err)
}

// isNoQueue reports whether err (wrapped or not) says the queue is gone.
func isNoQueue(err error) bool { return err != nil && classify(err) == classNoQueue }

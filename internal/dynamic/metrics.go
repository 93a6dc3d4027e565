package dynamic

import "time"

// Outcome is how a dynamic tool call ended; it labels metrics.
type Outcome string

// The outcomes of a dynamic tool call.
const (
	// OutcomeSuccess: the client answered with success:true.
	OutcomeSuccess Outcome = "success"
	// OutcomeFailure: the client answered with success:false.
	OutcomeFailure Outcome = "failure"
	// OutcomeClientError: the client answered with a JSON-RPC error; the
	// model got RequestFailedText.
	OutcomeClientError Outcome = "client_error"
	// OutcomeInvalidResponse: the client's answer did not decode; the model
	// got InvalidResponseText.
	OutcomeInvalidResponse Outcome = "invalid_response"
	// OutcomeCancelled: the call's context ended (turn interrupted) before
	// an answer.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeTimeout: no connection could take the call for
	// BrokerConfig.ReconnectTimeout.
	OutcomeTimeout Outcome = "timeout"
	// OutcomeUnanswered: the client held the call for
	// BrokerConfig.AnswerTimeout without answering.
	OutcomeUnanswered Outcome = "unanswered"
	// OutcomeSuperseded: a new call with the same thread and call id
	// replaced this one.
	OutcomeSuperseded Outcome = "superseded"
	// OutcomeClosed: the broker was closed (daemon shutdown).
	OutcomeClosed Outcome = "closed"
	// OutcomeInvalidArguments: the handler rejected the model's arguments;
	// the client was not asked.
	OutcomeInvalidArguments Outcome = "invalid_arguments"
)

// Answered reports whether the outcome comes from a client answer (the
// answer, or the reference's substitute for an unusable one).
func (o Outcome) Answered() bool {
	switch o {
	case OutcomeSuccess, OutcomeFailure, OutcomeClientError, OutcomeInvalidResponse:
		return true
	}
	return false
}

// IgnoredReason says why a client answer was not used.
type IgnoredReason string

// The reasons an answer is ignored.
const (
	// IgnoredUnknownCall: no pending call has that id (never existed, or
	// already settled and forgotten).
	IgnoredUnknownCall IgnoredReason = "unknown_call"
	// IgnoredDuplicate: the call was already settled (a second answer, an
	// answer from another connection, or an answer after cancellation).
	IgnoredDuplicate IgnoredReason = "duplicate"
)

// Metrics receives the broker's and handlers' measurements. Implementations
// must be safe for concurrent use and must not block; the daemon adapts them
// to Prometheus (a counter by outcome, a gauge, a histogram, a counter by
// reason).
type Metrics interface {
	// CallCompleted records one finished call and its round-trip latency
	// (from Call to its return; 0 for OutcomeInvalidArguments).
	CallCompleted(outcome Outcome, latency time.Duration)
	// AddPending adds delta (+1 when a call starts waiting, -1 when it is
	// settled and forgotten) to the pending calls gauge. Deltas, unlike
	// absolute values, stay correct when concurrent updates arrive out of
	// order.
	AddPending(delta int)
	// AnswerIgnored records a client answer that was not used.
	AnswerIgnored(reason IgnoredReason)
}

// NopMetrics discards every measurement.
type NopMetrics struct{}

// CallCompleted does nothing.
func (NopMetrics) CallCompleted(Outcome, time.Duration) {}

// AddPending does nothing.
func (NopMetrics) AddPending(int) {}

// AnswerIgnored does nothing.
func (NopMetrics) AnswerIgnored(IgnoredReason) {}

package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/broker/plog"
	"strata/controller"
)

// errCode maps an error from the log or the controller to a Kafka error
// code; anything unexpected is UNKNOWN_SERVER_ERROR (and logged by the
// caller).
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Code
	case errors.Is(err, plog.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, plog.ErrClosed):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, controller.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, controller.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, controller.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, controller.ErrInvalidReplication):
		return kerr.InvalidReplicationFactor.Code
	case errors.Is(err, controller.ErrNotController):
		return kerr.NotController.Code
	case errors.Is(err, controller.ErrNoReassignmentInProgress):
		return kerr.NoReassignmentInProgress.Code
	case errors.Is(err, controller.ErrInvalidReplicaAssignment):
		return kerr.InvalidReplicaAssignment.Code
	case plog.IsNoDescriptors(err):
		// Out of file descriptors (fd_budget.go): retriable, as a full
		// disk is, and not a failure of the broker.
		return kerr.KafkaStorageError.Code
	}
	return kerr.UnknownServerError.Code
}

// errMessage is the message to put beside a code, for response fields that
// carry one.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	m := err.Error()
	return &m
}

// validTopicName applies Kafka's rules: 1-249 characters of
// [a-zA-Z0-9._-], not "." or "..".
func validTopicName(name string) bool { return controller.ValidTopicName(name) }

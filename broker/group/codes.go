package group

import "github.com/twmb/franz-go/pkg/kerr"

// Kafka error codes the coordinator answers with.
var (
	codeNone                      int16 = 0
	codeUnknownServerError              = kerr.UnknownServerError.Code
	codeCoordinatorLoadInProgress       = kerr.CoordinatorLoadInProgress.Code
	codeCoordinatorNotAvailable         = kerr.CoordinatorNotAvailable.Code
	codeNotCoordinator                  = kerr.NotCoordinator.Code
	codeIllegalGeneration               = kerr.IllegalGeneration.Code
	codeInconsistentGroupProtocol       = kerr.InconsistentGroupProtocol.Code
	codeInvalidGroupID                  = kerr.InvalidGroupID.Code
	codeUnknownMemberID                 = kerr.UnknownMemberID.Code
	codeInvalidSessionTimeout           = kerr.InvalidSessionTimeout.Code
	codeRebalanceInProgress             = kerr.RebalanceInProgress.Code
	codeOffsetMetadataTooLarge          = kerr.OffsetMetadataTooLarge.Code
	codeUnknownTopicOrPartition         = kerr.UnknownTopicOrPartition.Code
	codeNonEmptyGroup                   = kerr.NonEmptyGroup.Code
	codeGroupIDNotFound                 = kerr.GroupIDNotFound.Code
	codeMemberIDRequired                = kerr.MemberIDRequired.Code
	codeFencedInstanceID                = kerr.FencedInstanceID.Code
	codeGroupMaxSizeReached             = kerr.GroupMaxSizeReached.Code
	codeGroupSubscribedToTopic          = kerr.GroupSubscribedToTopic.Code
	codeInvalidRequest                  = kerr.InvalidRequest.Code
)

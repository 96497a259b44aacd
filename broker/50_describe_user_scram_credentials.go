package broker

// DescribeUserScramCredentials, v0 (KIP-554): the SCRAM mechanisms and
// iteration counts of each user asked (every user when the list is null
// or empty),
// from the cluster metadata (ZooKeeper's /config/users, or the embedded
// controller's file). Never a salt or a key.

import (
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(50, 0, 0, handleDescribeUserScramCredentials) }

// scramMechanismIDs are KIP-554's ids of the SCRAM mechanisms.
var scramMechanismIDs = map[string]int8{"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}

func scramMechanismName(id int8) string {
	for n, i := range scramMechanismIDs {
		if i == id {
			return n
		}
	}
	return ""
}

func handleDescribeUserScramCredentials(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.authorizedCluster(cc, acl.OpDescribe) { // authz.go; Kafka: Describe on the cluster
		resp.ErrorCode = errClusterAuth
		return resp, nil
	}
	users := s.ctrl.Metadata().ScramUsers
	var names []string
	if len(req.Users) == 0 { // null or empty: every user, as in Kafka (the admin client sends an empty list)
		for u := range users {
			names = append(names, u)
		}
		sort.Strings(names)
	} else {
		for _, u := range req.Users {
			names = append(names, u.Name)
		}
	}
	seen := map[string]int{}
	for _, n := range names {
		seen[n]++
	}
	for _, n := range names {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = n
		creds, ok := users[n]
		switch {
		case seen[n] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + n)
		case !ok:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe nonexistent credential for user " + n)
		default:
			for _, mech := range slices.Sorted(func(yield func(string) bool) {
				for m := range creds {
					if !yield(m) {
						return
					}
				}
			}) {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = scramMechanismIDs[mech], creds[mech].Iterations
				r.CredentialInfos = append(r.CredentialInfos, ci)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

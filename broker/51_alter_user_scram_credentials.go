package broker

// AlterUserScramCredentials, v0 (KIP-554): upserts and deletes users'
// SCRAM credentials. The client sends the salt and the salted password
// (never the password); the broker keeps the salt, the stored key and the
// server key derived from it, as Kafka does, through the controller
// (forwarded to it in a ZooKeeper cluster: it writes /config/users/<user>
// with a change notification, and every broker picks it up from there).
// Kafka's checks: a known mechanism, 4096 to 16384 iterations, a user
// named, no user and mechanism twice in one request, and deleting only
// what exists.

import (
	"errors"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/network"
	"strata/controller"
)

func init() { registerForwarded(51, 0, 0, handleAlterUserScramCredentials) }

const (
	minScramIterations = 4096
	maxScramIterations = 16384
)

func handleAlterUserScramCredentials(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !s.authorizedCluster(cc, acl.OpAlter) { // authz.go; Kafka: Alter on the cluster, else every user refused
		seen := map[string]bool{}
		for _, d := range req.Deletions {
			seen[d.Name] = true
		}
		for _, u := range req.Upsertions {
			seen[u.Name] = true
		}
		for _, u := range slices.Sorted(maps.Keys(seen)) {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode = u, errClusterAuth
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	type key struct {
		user string
		mech int8
	}
	count := map[key]int{}
	var order []string
	failed := map[string]*kmsg.AlterUserSCRAMCredentialsResponseResult{}
	fail := func(user string, code int16, msg string) {
		if _, ok := failed[user]; ok {
			return
		}
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode, r.ErrorMessage = user, code, kmsg.StringPtr(msg)
		failed[user] = &r
	}
	note := func(user string) {
		for _, u := range order {
			if u == user {
				return
			}
		}
		order = append(order, user)
	}
	for _, d := range req.Deletions {
		note(d.Name)
		count[key{d.Name, d.Mechanism}]++
	}
	for _, u := range req.Upsertions {
		note(u.Name)
		count[key{u.Name, u.Mechanism}]++
	}
	md := s.ctrl.Metadata()
	check := func(user string, mech int8) (string, bool) {
		name := scramMechanismName(mech)
		switch {
		case user == "":
			fail(user, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case name == "":
			fail(user, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		case count[key{user, mech}] > 1:
			fail(user, kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
		default:
			return name, true
		}
		return "", false
	}
	next := map[string]map[string]controller.ScramCredential{}
	creds := func(user string) map[string]controller.ScramCredential {
		if next[user] == nil {
			next[user] = maps.Clone(md.ScramUsers[user])
			if next[user] == nil {
				next[user] = map[string]controller.ScramCredential{}
			}
		}
		return next[user]
	}
	for _, d := range req.Deletions {
		name, ok := check(d.Name, d.Mechanism)
		if !ok {
			continue
		}
		c := creds(d.Name)
		if _, ok := c[name]; !ok {
			fail(d.Name, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
			continue
		}
		delete(c, name)
	}
	for _, u := range req.Upsertions {
		name, ok := check(u.Name, u.Mechanism)
		if !ok {
			continue
		}
		switch {
		case u.Iterations < minScramIterations:
			fail(u.Name, kerr.UnacceptableCredential.Code, "Too few iterations")
			continue
		case u.Iterations > maxScramIterations:
			fail(u.Name, kerr.UnacceptableCredential.Code, "Too many iterations")
			continue
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			fail(u.Name, kerr.UnacceptableCredential.Code, "Salt and salted password must not be empty")
			continue
		}
		stored, server := network.ScramKeys(network.ScramHash(name), u.SaltedPassword)
		creds(u.Name)[name] = controller.ScramCredential{Salt: u.Salt, StoredKey: stored, ServerKey: server, Iterations: u.Iterations}
	}
	for _, user := range order {
		if r, ok := failed[user]; ok {
			resp.Results = append(resp.Results, *r)
			continue
		}
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		if err := s.ctrl.SetUserScram(s.ctx, user, next[user]); err != nil {
			r.ErrorCode, r.ErrorMessage = errCode(err), kmsg.StringPtr(err.Error())
			if errors.Is(err, controller.ErrNotController) {
				r.ErrorMessage = nil
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

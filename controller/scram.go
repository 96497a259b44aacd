package controller

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// ScramCredential is one user's credential for one SCRAM mechanism (RFC
// 5802), as Kafka keeps it: the salt, the stored and server keys derived
// from the salted password, and the iteration count. The password itself
// is never kept.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// String is Kafka's form of the credential in /config/users/<user>
// (ScramCredentialUtils.credentialToString):
// salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>.
func (c ScramCredential) String() string {
	e := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("salt=%s,stored_key=%s,server_key=%s,iterations=%d", e(c.Salt), e(c.StoredKey), e(c.ServerKey), c.Iterations)
}

// ParseScramCredential parses Kafka's form of a credential (String).
func ParseScramCredential(s string) (ScramCredential, error) {
	var c ScramCredential
	seen := 0
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return c, fmt.Errorf("SCRAM credential: %q is not name=value", kv)
		}
		var err error
		switch k {
		case "salt":
			c.Salt, err = base64.StdEncoding.DecodeString(v)
		case "stored_key":
			c.StoredKey, err = base64.StdEncoding.DecodeString(v)
		case "server_key":
			c.ServerKey, err = base64.StdEncoding.DecodeString(v)
		case "iterations":
			var n int64
			n, err = strconv.ParseInt(v, 10, 32)
			c.Iterations = int32(n)
		default:
			continue
		}
		if err != nil {
			return c, fmt.Errorf("SCRAM credential: %s: %w", k, err)
		}
		seen++
	}
	if seen != 4 || c.Iterations <= 0 {
		return c, fmt.Errorf("SCRAM credential: needs salt, stored_key, server_key and iterations")
	}
	return c, nil
}

// ScramMechanisms are the SCRAM mechanisms, by Kafka's names; a user's
// credentials are keyed by them.
var ScramMechanisms = []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}

// ScramStore is where a controller keeps the SCRAM credentials
// (DescribeUserScramCredentials, AlterUserScramCredentials): in
// ZooKeeper's /config/users/<user> for the ZooKeeper controller, in the
// metadata file for the embedded one. Metadata.ScramUsers holds them.
type ScramStore interface {
	// SetUserScram replaces user's SCRAM credentials with creds (by
	// mechanism); an empty creds removes them all.
	SetUserScram(ctx context.Context, user string, creds map[string]ScramCredential) error
}

// setUserScram replaces a user's credentials in md.
func (md *Metadata) setUserScram(user string, creds map[string]ScramCredential) {
	next := make(map[string]map[string]ScramCredential, len(md.ScramUsers)+1)
	maps.Copy(next, md.ScramUsers)
	if len(creds) == 0 {
		delete(next, user)
	} else {
		next[user] = maps.Clone(creds)
	}
	md.ScramUsers = next
}

func (m *Memory) SetUserScram(ctx context.Context, user string, creds map[string]ScramCredential) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.update(func(md *Metadata) { md.setUserScram(user, creds) })
	return nil
}

func (e *Embedded) SetUserScram(ctx context.Context, user string, creds map[string]ScramCredential) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.update(func(md *Metadata) error {
		md.setUserScram(user, creds)
		return nil
	})
}

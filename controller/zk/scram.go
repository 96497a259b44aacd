package zk

// SCRAM credentials where Kafka's ZooKeeper mode keeps them:
// /config/users/<user>, a config znode whose SCRAM-SHA-256 and
// SCRAM-SHA-512 entries hold the credential in Kafka's form
// (salt=…,stored_key=…,server_key=…,iterations=…), each change recorded
// in /config/changes with entity_path users/<user>. Every broker watches
// /config/users and its znodes (build), so a change reaches all of them
// within a second. /config/users is one of the owner-only paths
// (acl.go).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"

	"github.com/go-zookeeper/zk"

	"strata/controller"
)

// userEntity is the znode name of a user: Kafka's ZooKeeper mode
// URL-encodes it (Sanitizer.sanitize: a space is %20).
func userEntity(user string) string {
	return strings.ReplaceAll(url.QueryEscape(user), "+", "%20")
}

// buildScramUsers reads the SCRAM credentials of /config/users into md.
func (c *Controller) buildScramUsers(md *controller.Metadata) error {
	users, err := c.children(userConfigsPath)
	if err != nil {
		return err
	}
	for _, ent := range users {
		e, err := c.get(userConfigsPath + "/" + ent)
		if err != nil {
			return err
		}
		if !e.exists {
			continue
		}
		cfg, err := decodeConfig(e.data)
		if err != nil {
			continue
		}
		user, err := url.QueryUnescape(ent)
		if err != nil {
			user = ent
		}
		for _, mech := range controller.ScramMechanisms {
			s, ok := cfg[mech]
			if !ok {
				continue
			}
			cred, err := controller.ParseScramCredential(s)
			if err != nil {
				c.log.Warn("bad SCRAM credential in zookeeper", "user", user, "mechanism", mech, "err", err)
				continue
			}
			if md.ScramUsers == nil {
				md.ScramUsers = map[string]map[string]controller.ScramCredential{}
			}
			if md.ScramUsers[user] == nil {
				md.ScramUsers[user] = map[string]controller.ScramCredential{}
			}
			md.ScramUsers[user][mech] = cred
		}
	}
	return nil
}

// SetUserScram replaces user's SCRAM credentials in /config/users/<user>,
// keeping the znode's other configs (quotas), with a change notification.
func (c *Controller) SetUserScram(ctx context.Context, user string, creds map[string]controller.ScramCredential) error {
	end, err := c.begin()
	if err != nil {
		return err
	}
	defer end()
	ent := userEntity(user)
	path := userConfigsPath + "/" + ent
	cfg := map[string]string{}
	data, _, err := c.conn.Get(c.p(path))
	switch {
	case errors.Is(err, zk.ErrNoNode):
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	default:
		if cfg, err = decodeConfig(data); err != nil {
			return err
		}
	}
	for _, mech := range controller.ScramMechanisms {
		delete(cfg, mech)
	}
	for mech, cred := range creds {
		cfg[mech] = cred.String()
	}
	if err := c.writeConfig(path, "users/"+ent, cfg); err != nil {
		return fmt.Errorf("set SCRAM credentials of user %s: %w", user, err)
	}
	return c.waitFor(ctx, func(md *controller.Metadata) bool {
		return maps.EqualFunc(md.ScramUsers[user], creds, func(a, b controller.ScramCredential) bool { return a.String() == b.String() })
	})
}

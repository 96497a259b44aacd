package zk

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
)

// Auth is how a broker's ZooKeeper session authenticates and which ACLs
// its znodes get.
//
// Credentials are those of ZooKeeper's built-in digest scheme (zkCli's
// `addauth digest user:password`): the session's identity is
// digest:user:base64(sha1(user:password)); the server needs no
// configuration. go-zookeeper speaks no SASL, so Kerberos or SASL
// DIGEST-MD5 (Kafka's JAAS Client section) are not offered.
type Auth struct {
	// DigestUser and DigestPassword are zookeeper.digest.user and
	// zookeeper.digest.password; both empty: an unauthenticated session.
	DigestUser     string
	DigestPassword string
	// SetACL is zookeeper.set.acl: every znode created gets Kafka's secure
	// ACLs (ZkData.defaultAcls), and existing znodes under Kafka's secure
	// root paths are given them when the broker starts. False: znodes are
	// created open to everyone (world:anyone ALL).
	SetACL bool
}

// String never shows the password.
func (a Auth) String() string {
	if a.DigestUser == "" {
		return fmt.Sprintf("{set_acl:%v}", a.SetACL)
	}
	return fmt.Sprintf("{digest_user:%s password:[hidden] set_acl:%v}", a.DigestUser, a.SetACL)
}

// LogValue never shows the password.
func (a Auth) LogValue() slog.Value { return slog.StringValue(a.String()) }

// Validate reports credentials that cannot work, in one line naming
// Kafka-style keys; it never prints the password.
func (a Auth) Validate() error {
	switch {
	case a.SetACL && a.DigestUser == "" && a.DigestPassword == "":
		return errors.New("zookeeper.set.acl=true needs ZooKeeper credentials: set zookeeper.digest.user and zookeeper.digest.password")
	case a.DigestUser == "" && a.DigestPassword != "":
		return errors.New("zookeeper.digest.password is set without zookeeper.digest.user")
	case a.DigestUser != "" && a.DigestPassword == "":
		return errors.New("zookeeper.digest.user is set without zookeeper.digest.password")
	case strings.ContainsAny(a.DigestUser, ":\n\r"):
		return fmt.Errorf("zookeeper.digest.user %q: must not contain ':' or a line break", a.DigestUser)
	}
	return nil
}

func (a Auth) hasCredentials() bool { return a.DigestUser != "" }

// addAuth authenticates conn. go-zookeeper sends the credentials again,
// before anything else, on every reconnect.
func (a Auth) addAuth(conn *zk.Conn) error {
	if !a.hasCredentials() {
		return nil
	}
	if err := conn.AddAuth("digest", []byte(a.DigestUser+":"+a.DigestPassword)); err != nil {
		return fmt.Errorf("zookeeper digest authentication as %q: %w", a.DigestUser, err)
	}
	return nil
}

// Kafka's secure root paths (ZkData.SecureRootPaths and
// ZkAclStore.securePaths): the subtrees whose znodes are secured when
// zookeeper.set.acl turns on.
var secureRootPaths = []string{
	"/admin", "/brokers", "/cluster", "/config", controllerPath, controllerEpochPth,
	"/isr_change_notification", producerIDPath, "/log_dir_event_notification",
	"/delegation_token", "/feature",
	"/kafka-acl", "/kafka-acl-changes", "/kafka-acl-extended", "/kafka-acl-extended-changes",
}

// sensitiveRootPaths are readable by the brokers' identity only
// (ZkData.SensitiveRootPaths): SCRAM credentials, broker configs (which
// may hold passwords) and delegation tokens.
var sensitiveRootPaths = []string{"/config/users", brokerConfigsPath, "/delegation_token/tokens"}

// sensitivePath reports whether a Kafka path (below the chroot) is under a
// sensitive root. Kafka matches by string prefix; so does this.
func sensitivePath(path string) bool {
	for _, r := range sensitiveRootPaths {
		if strings.HasPrefix(path, r) {
			return true
		}
	}
	return false
}

// aclPolicy gives each znode its ACL.
type aclPolicy struct {
	secure    bool
	chroot    string
	owner     []zk.ACL // the brokers' identity: ALL
	ownerRead []zk.ACL // owner plus world READ
}

func newACLPolicy(a Auth, chroot string) aclPolicy {
	p := aclPolicy{secure: a.SetACL, chroot: chroot}
	if p.secure {
		// Kafka's ZooDefs.Ids.CREATOR_ALL_ACL, spelt out as the digest
		// identity the "auth" scheme resolves to, so that it can be
		// compared with what the server holds.
		p.owner = zk.DigestACL(zk.PermAll, a.DigestUser, a.DigestPassword)
		p.ownerRead = append(slices.Clone(p.owner), zk.WorldACL(zk.PermRead)...)
	}
	return p
}

// forPath is the ACL for a znode, given by its full path (chroot
// included): Kafka's ZkData.defaultAcls.
func (p aclPolicy) forPath(full string) []zk.ACL {
	if !p.secure {
		return zk.WorldACL(zk.PermAll)
	}
	path := full
	if p.chroot != "" && strings.HasPrefix(full, p.chroot+"/") {
		path = full[len(p.chroot):]
	}
	if sensitivePath(path) {
		return p.owner
	}
	return p.ownerRead
}

// acl is the ACL for a znode given by its full path.
func (c *Controller) acl(full string) []zk.ACL { return c.acls.forPath(full) }

func sameACL(a, b []zk.ACL) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// noAuthHint explains a NoAuth refusal, naming the configs to look at.
func (c *Controller) noAuthHint() string {
	if !c.opts.Auth.hasCredentials() {
		return "the znode's ACL lets only an authenticated session change it (set zookeeper.digest.user and zookeeper.digest.password)"
	}
	return fmt.Sprintf("the znode's ACL does not let this broker's ZooKeeper identity (zookeeper.digest.user %q) change it", c.opts.Auth.DigestUser)
}

// visit is a znode secureExisting secures: its subtree, or it alone.
type visit struct {
	path  string
	alone bool
}

// secureWorkers bounds the requests in flight while securing znodes.
const secureWorkers = 16

// secureExisting gives every znode under Kafka's secure root paths the ACL
// forPath names, as kafka's zookeeper-security-migration tool does with
// --zookeeper.acl=secure, and the chroot znode itself. It is run by every broker at start when
// zookeeper.set.acl is on: it reads each znode's ACL and sets those that
// differ, so a secured tree costs one read per znode. A znode this
// broker's identity may not change (owned by other credentials) fails the
// start.
func (c *Controller) secureExisting() error {
	if !c.acls.secure {
		return nil
	}
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		todo     []visit // znodes to visit
		busy     int     // workers visiting one
		firstErr error
		changed  int
		wg       sync.WaitGroup
	)
	for _, r := range secureRootPaths {
		todo = append(todo, visit{path: c.p(r)})
	}
	if c.chroot != "" {
		// ZooKeeper checks a delete against the parent's ACL: an open
		// chroot would let anyone delete /controller or
		// /controller_epoch. Its children are walked from the roots.
		todo = append(todo, visit{path: c.chroot, alone: true})
	}
	secure := func(v visit) ([]string, bool, error) {
		full := v.path
		acl, st, err := c.conn.GetACL(full)
		if err != nil {
			return nil, false, err
		}
		set := false
		if want := c.acl(full); !sameACL(acl, want) {
			if _, err := c.conn.SetACL(full, want, st.Aversion); err != nil {
				return nil, false, err
			}
			set = true
		}
		if v.alone {
			return nil, set, nil
		}
		kids, _, err := c.conn.Children(full)
		return kids, set, err
	}
	for range secureWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			for {
				for len(todo) == 0 && busy > 0 && firstErr == nil {
					cond.Wait()
				}
				if len(todo) == 0 || firstErr != nil {
					cond.Broadcast()
					return
				}
				v := todo[len(todo)-1]
				full := v.path
				todo = todo[:len(todo)-1]
				busy++
				mu.Unlock()
				kids, set, err := secure(v)
				mu.Lock()
				busy--
				switch {
				case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
					// Gone meanwhile (an ephemeral), or its ACL changed
					// under us: the next start looks again.
				case errors.Is(err, zk.ErrNoAuth):
					if firstErr == nil {
						firstErr = fmt.Errorf("secure %s: %w: %s", full, err, c.noAuthHint())
					}
				case err != nil:
					if firstErr == nil {
						firstErr = fmt.Errorf("secure %s: %w", full, err)
					}
				default:
					if set {
						changed++
					}
					for _, k := range kids {
						todo = append(todo, visit{path: full + "/" + k})
					}
				}
				cond.Broadcast()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if changed > 0 {
		c.log.Info("secured existing znodes (zookeeper.set.acl)", "znodes", changed)
	}
	return nil
}

package acl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"strata/controller"
)

// Kafka's names for authorizer.class.name; both mean this authorizer.
const (
	ClassAclAuthorizer      = "kafka.security.authorizer.AclAuthorizer"
	ClassStandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
)

// Enabled reports whether authorizer.class.name names an authorizer
// (empty: none, everything is allowed), or an error for a class Strata
// does not have.
func Enabled(className string) (bool, error) {
	switch strings.TrimSpace(className) {
	case "":
		return false, nil
	case ClassAclAuthorizer, ClassStandardAuthorizer:
		return true, nil
	}
	return false, fmt.Errorf("authorizer.class.name %q: Strata has only %s (or %s, the same)", className, ClassAclAuthorizer, ClassStandardAuthorizer)
}

// ParseSuperUsers reads super.users: principals separated by ';'
// (User:admin;User:broker).
func ParseSuperUsers(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return nil, fmt.Errorf("super.users: %q is not a principal (User:name)", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// Authorizer decides requests from the ACLs of a store.
type Authorizer struct {
	superUsers  map[string]bool
	allowIfNone bool
	store       controller.ACLStore

	mu       sync.RWMutex
	literal  map[litKey][]Entry // literal patterns, "*" included
	prefixed map[ResourceType][]prefixed
}

type litKey struct {
	t    ResourceType
	name string
}

type prefixed struct {
	prefix  string
	entries []Entry
}

// New returns an authorizer over store's ACLs; superUsers are
// super.users, allowIfNone is allow.everyone.if.no.acl.found.
func New(store controller.ACLStore, superUsers []string, allowIfNone bool) *Authorizer {
	a := &Authorizer{superUsers: map[string]bool{}, allowIfNone: allowIfNone, store: store}
	for _, u := range superUsers {
		a.superUsers[u] = true
	}
	a.load(store.ACLs())
	return a
}

// Run keeps the authorizer's copy of the ACLs in step with the store
// until ctx ends.
func (a *Authorizer) Run(ctx context.Context) {
	for {
		ch := a.store.ACLChanges()
		a.load(a.store.ACLs())
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// Refresh loads the store's current ACLs now.
func (a *Authorizer) Refresh() { a.load(a.store.ACLs()) }

// load replaces the authorizer's ACLs. Stored ACLs it cannot read (a
// name it does not know) are left out.
func (a *Authorizer) load(all map[controller.ACLResource][]controller.ACLEntry) {
	lit := map[litKey][]Entry{}
	pre := map[ResourceType][]prefixed{}
	for r, stored := range all {
		res, ok := FromStored(r)
		if !ok {
			continue
		}
		var es []Entry
		for _, s := range stored {
			if e, ok := entryFromStored(s); ok {
				es = append(es, e)
			}
		}
		if res.Pattern == PatternPrefixed {
			pre[res.Type] = append(pre[res.Type], prefixed{prefix: res.Name, entries: es})
		} else {
			lit[litKey{res.Type, res.Name}] = es
		}
	}
	a.mu.Lock()
	a.literal, a.prefixed = lit, pre
	a.mu.Unlock()
}

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.superUsers[principal] }

// Authorize decides whether principal, connected from host, may do op on
// the resource of type t named name.
func (a *Authorizer) Authorize(principal, host string, op Operation, t ResourceType, name string) bool {
	if a.superUsers[principal] {
		return true
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	var found bool
	var matching [][]Entry
	add := func(es []Entry) {
		if es != nil {
			found = true
			matching = append(matching, es)
		}
	}
	add(a.literal[litKey{t, name}])
	if name != Wildcard {
		add(a.literal[litKey{t, Wildcard}])
	}
	for _, p := range a.prefixed[t] {
		if strings.HasPrefix(name, p.prefix) {
			add(p.entries)
		}
	}
	if !found {
		return a.allowIfNone
	}
	for _, es := range matching {
		for _, e := range es {
			if e.Permission == PermDeny && e.matches(principal, host) && (e.Operation == op || e.Operation == OpAll) {
				return false
			}
		}
	}
	for _, es := range matching {
		for _, e := range es {
			if e.Permission == PermAllow && e.matches(principal, host) && implies(e.Operation, op) {
				return true
			}
		}
	}
	return false
}

// AuthorizeAny reports whether principal may do op on some resource of
// type t: an Allow of it on any pattern that no Deny of the whole type
// cancels (Kafka's authorizeByResourceType, simplified to what its
// callers ask: may an idempotent producer write at all).
func (a *Authorizer) AuthorizeAny(principal, host string, op Operation, t ResourceType) bool {
	if a.superUsers[principal] {
		return true
	}
	if a.Authorize(principal, host, op, t, Wildcard) {
		return true
	}
	// Candidates: the resources an Allow names. A Deny of one (on it, a
	// prefix of it or the wildcard) cancels it, as Authorize decides;
	// it runs after the lock is let go, as it takes it itself.
	var names []string
	a.mu.RLock()
	allowed := func(es []Entry) bool {
		for _, e := range es {
			if e.Permission == PermAllow && e.matches(principal, host) && implies(e.Operation, op) {
				return true
			}
		}
		return false
	}
	for k, es := range a.literal {
		if k.t == t && allowed(es) {
			names = append(names, k.name)
		}
	}
	for _, p := range a.prefixed[t] {
		if allowed(p.entries) {
			names = append(names, p.prefix)
		}
	}
	a.mu.RUnlock()
	for _, name := range names {
		if a.Authorize(principal, host, op, t, name) {
			return true
		}
	}
	return false
}

func (e Entry) matches(principal, host string) bool {
	return (e.Principal == principal || e.Principal == "User:*") && (e.Host == host || e.Host == Wildcard)
}

// implies reports whether an ACL for op allows want: All allows
// everything; Read, Write, Delete and Alter allow Describe; AlterConfigs
// allows DescribeConfigs.
func implies(op, want Operation) bool {
	switch {
	case op == want || op == OpAll:
		return true
	case want == OpDescribe:
		return op == OpRead || op == OpWrite || op == OpDelete || op == OpAlter
	case want == OpDescribeConfigs:
		return op == OpAlterConfigs
	}
	return false
}

// FromStored reads a stored resource pattern.
func FromStored(r controller.ACLResource) (Resource, bool) {
	t, ok1 := ParseResourceType(r.Type)
	p, ok2 := ParsePatternType(r.Pattern)
	return Resource{Type: t, Pattern: p, Name: r.Name}, ok1 && ok2
}

// Stored is how a resource pattern is stored.
func (r Resource) Stored() controller.ACLResource {
	return controller.ACLResource{Type: r.Type.String(), Pattern: r.Pattern.String(), Name: r.Name}
}

func entryFromStored(s controller.ACLEntry) (Entry, bool) {
	op, ok1 := ParseOperation(s.Operation)
	perm, ok2 := ParsePermission(s.PermissionType)
	return Entry{Principal: s.Principal, Host: s.Host, Operation: op, Permission: perm}, ok1 && ok2
}

// Stored is how an entry is stored.
func (e Entry) Stored() controller.ACLEntry {
	return controller.ACLEntry{Principal: e.Principal, PermissionType: e.Permission.String(), Operation: e.Operation.String(), Host: e.Host}
}

// Validate reports why a binding cannot be created (Kafka's
// INVALID_REQUEST reasons), or nil.
func (b Binding) Validate() error {
	switch {
	case resourceNames[b.Type] == "":
		return errors.New("resource type must be a specific type")
	case b.Pattern != PatternLiteral && b.Pattern != PatternPrefixed:
		return errors.New("pattern type must be LITERAL or PREFIXED")
	case b.Name == "":
		return errors.New("resource name must not be empty")
	case b.Type == ResourceCluster && b.Name != ClusterName:
		return fmt.Errorf("the cluster resource is named %s", ClusterName)
	case opNames[b.Operation] == "":
		return errors.New("operation must be a specific operation")
	case b.Permission != PermAllow && b.Permission != PermDeny:
		return errors.New("permission type must be ALLOW or DENY")
	case b.Host == "":
		return errors.New("host must not be empty (use *)")
	}
	typ, name, ok := strings.Cut(b.Principal, ":")
	if !ok || typ == "" || name == "" {
		return fmt.Errorf("principal %q is not TYPE:name", b.Principal)
	}
	return nil
}

// Filter selects bindings (Kafka's AclBindingFilter): a nil field, Any
// and the zero values match anything.
type Filter struct {
	Type       ResourceType // ResourceAny: any
	Name       *string
	Pattern    PatternType // PatternAny, PatternMatch, or a specific one
	Principal  *string
	Host       *string
	Operation  Operation  // OpAny: any
	Permission Permission // PermAny: any
}

// Matches reports whether the filter selects b.
func (f Filter) Matches(b Binding) bool {
	if f.Type != ResourceAny && f.Type != b.Type {
		return false
	}
	switch f.Pattern {
	case PatternAny:
		if f.Name != nil && *f.Name != b.Name {
			return false
		}
	case PatternMatch:
		if f.Name != nil {
			n := *f.Name
			ok := b.Pattern == PatternLiteral && (b.Name == n || b.Name == Wildcard) ||
				b.Pattern == PatternPrefixed && strings.HasPrefix(n, b.Name)
			if !ok {
				return false
			}
		}
	default:
		if f.Pattern != b.Pattern || f.Name != nil && *f.Name != b.Name {
			return false
		}
	}
	return (f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == OpAny || f.Operation == b.Operation) &&
		(f.Permission == PermAny || f.Permission == b.Permission)
}

// Bindings returns every binding the filter selects.
func (a *Authorizer) Bindings(f Filter) []Binding {
	var out []Binding
	for r, stored := range a.store.ACLs() {
		res, ok := FromStored(r)
		if !ok {
			continue
		}
		for _, s := range stored {
			e, ok := entryFromStored(s)
			if b := (Binding{res, e}); ok && f.Matches(b) {
				out = append(out, b)
			}
		}
	}
	return out
}

// Create adds b to the store (a binding already there is kept once).
func (a *Authorizer) Create(ctx context.Context, b Binding) error {
	s := b.Entry.Stored()
	err := a.store.UpdateACLs(ctx, b.Resource.Stored(), func(cur []controller.ACLEntry) []controller.ACLEntry {
		for _, c := range cur {
			if c == s {
				return cur
			}
		}
		return append(cur, s)
	})
	a.Refresh()
	return err
}

// Delete removes the bindings f selects from the store and returns them.
func (a *Authorizer) Delete(ctx context.Context, f Filter) ([]Binding, error) {
	var deleted []Binding
	byRes := map[Resource]bool{}
	for _, b := range a.Bindings(f) {
		byRes[b.Resource] = true
	}
	for res := range byRes {
		var mine []Binding // edit may run again when the store retries
		err := a.store.UpdateACLs(ctx, res.Stored(), func(cur []controller.ACLEntry) []controller.ACLEntry {
			var keep []controller.ACLEntry
			mine = mine[:0]
			for _, s := range cur {
				e, ok := entryFromStored(s)
				if b := (Binding{res, e}); ok && f.Matches(b) {
					mine = append(mine, b)
					continue
				}
				keep = append(keep, s)
			}
			return keep
		})
		if err == nil {
			deleted = append(deleted, mine...)
		}
		if err != nil {
			a.Refresh()
			return deleted, err
		}
	}
	a.Refresh()
	return deleted, nil
}

package controller

import (
	"context"
	"slices"
	"sync"
)

// ACLResource is a resource pattern ACLs are attached to, with Kafka's
// names as its ZooKeeper mode stores them: Type is "Topic", "Group",
// "Cluster", "TransactionalId", "DelegationToken" or "User"; Pattern is
// "LITERAL" or "PREFIXED"; Name is the resource name ("*" as a literal
// is every resource of the type; "kafka-cluster" is the cluster).
type ACLResource struct {
	Type    string
	Pattern string
	Name    string
}

// ACLEntry is one ACL of a resource, as Kafka's JSON in /kafka-acl
// spells it: Principal "User:alice" (or "User:*"), PermissionType
// "Allow" or "Deny", Operation "Read", "Write", … and Host (or "*").
type ACLEntry struct {
	Principal      string `json:"principal"`
	PermissionType string `json:"permissionType"`
	Operation      string `json:"operation"`
	Host           string `json:"host"`
}

// ACLStore is kept by controllers that store ACLs (Kafka's
// AclAuthorizer's storage): the embedded controller in its metadata
// file, the ZooKeeper controller in /kafka-acl and /kafka-acl-extended.
type ACLStore interface {
	// ACLs returns every resource's ACLs; the caller must not modify
	// them.
	ACLs() map[ACLResource][]ACLEntry
	// ACLChanges returns a channel closed at the next change of ACLs,
	// made here or (ZooKeeper) by another broker.
	ACLChanges() <-chan struct{}
	// UpdateACLs replaces the ACLs of res with what edit makes of its
	// current ones, atomically; no ACLs left removes the resource.
	UpdateACLs(ctx context.Context, res ACLResource, edit func([]ACLEntry) []ACLEntry) error
}

// aclSet is an ACLStore's published state.
type aclSet struct {
	mu      sync.Mutex
	acls    map[ACLResource][]ACLEntry
	changed chan struct{}
}

func (s *aclSet) get() (map[ACLResource][]ACLEntry, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.acls, s.changed
}

// set publishes acls (a new map, never modified afterwards).
func (s *aclSet) set(acls map[ACLResource][]ACLEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acls = acls
	if s.changed != nil {
		close(s.changed)
	}
	s.changed = make(chan struct{})
}

// ACLSet is the published ACLs of a store, for the stores of other
// packages (controller/zk).
type ACLSet struct{ s aclSet }

// Get returns the published ACLs and a channel closed at their next change.
func (a *ACLSet) Get() (map[ACLResource][]ACLEntry, <-chan struct{}) { return a.s.get() }

// Set publishes acls, a new map the caller does not modify afterwards.
func (a *ACLSet) Set(acls map[ACLResource][]ACLEntry) { a.s.set(acls) }

// Put publishes entries as res's ACLs (none: res has none).
func (a *ACLSet) Put(res ACLResource, entries []ACLEntry) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	a.s.acls = withACLs(a.s.acls, res, entries)
	if a.s.changed != nil {
		close(a.s.changed)
	}
	a.s.changed = make(chan struct{})
}

// withACLs returns a copy of acls with res's ACLs replaced by entries
// (removed when there are none).
func withACLs(acls map[ACLResource][]ACLEntry, res ACLResource, entries []ACLEntry) map[ACLResource][]ACLEntry {
	out := make(map[ACLResource][]ACLEntry, len(acls)+1)
	for k, v := range acls {
		out[k] = v
	}
	if len(entries) == 0 {
		delete(out, res)
	} else {
		out[res] = slices.Clone(entries)
	}
	return out
}

// storedACLs is one resource's ACLs in the embedded metadata file.
type storedACLs struct {
	ResourceType string     `json:"resource_type"`
	PatternType  string     `json:"pattern_type"`
	Name         string     `json:"name"`
	ACLs         []ACLEntry `json:"acls"`
}

func (e *Embedded) ACLs() map[ACLResource][]ACLEntry {
	m, _ := e.acls.get()
	return m
}

func (e *Embedded) ACLChanges() <-chan struct{} {
	_, ch := e.acls.get()
	return ch
}

// UpdateACLs changes the ACLs of res and persists them with the rest of
// the metadata.
func (e *Embedded) UpdateACLs(ctx context.Context, res ACLResource, edit func([]ACLEntry) []ACLEntry) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	cur, _ := e.acls.get()
	next := withACLs(cur, res, edit(slices.Clone(cur[res])))
	if err := e.persistWith(e.md, next); err != nil {
		return err
	}
	e.acls.set(next)
	return nil
}

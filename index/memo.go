package index

import "sync"

// memo keeps the answers of LogStart, LogEnd and LogStartOffset, which the
// broker asks for each tiered partition of every fetch, and which change
// only when that partition's segments or log start offset are written.
// Without it each answer is a Badger iterator over the partition's
// segments; in the tier bench those lookups took a sixth of the broker's
// CPU time during a cold read.
//
// Every write that can change a partition's answers bumps the partition's
// generation once it has been applied (ForgetTopic bumps all of them). An
// answer is stored with the generations read before it was computed and
// is used only while they are still current, so an answer computed from a
// snapshot older than a write is never used after that write returns.
type memo struct {
	mu     sync.Mutex
	global uint64                      // bumped by writes to any partition
	gens   map[TopicIDPartition]uint64 // bumped by writes to one partition
	vals   map[memoKey]memoVal
}

type memoKind uint8

const (
	memoLogStart memoKind = iota
	memoLogEnd
	memoLogStartOffset
)

type memoKey struct {
	tp   TopicIDPartition
	kind memoKind
}

type memoVal struct {
	global, gen uint64
	off         int64
	ok          bool
}

// stamp is the generations an answer about tp computed from now on is
// stored with.
func (m *memo) stamp(tp TopicIDPartition) memoVal {
	m.mu.Lock()
	defer m.mu.Unlock()
	return memoVal{global: m.global, gen: m.gens[tp]}
}

func (m *memo) get(k memoKey) (memoVal, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vals[k]
	return v, ok && v.global == m.global && v.gen == m.gens[k.tp]
}

// put stores v unless a write has bumped its generations since its stamp.
func (m *memo) put(k memoKey, v memoVal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v.global != m.global || v.gen != m.gens[k.tp] {
		return
	}
	if m.vals == nil {
		m.vals = map[memoKey]memoVal{}
	}
	m.vals[k] = v
}

// touch invalidates tp's answers; called after each write to tp.
func (m *memo) touch(tp TopicIDPartition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gens == nil {
		m.gens = map[TopicIDPartition]uint64{}
	}
	m.gens[tp]++
	for kind := range memoLogStartOffset + 1 {
		delete(m.vals, memoKey{tp, kind})
	}
}

// touchAll invalidates every answer.
func (m *memo) touchAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.global++
	clear(m.gens) // every stored answer is stale by global already
	clear(m.vals)
}

// memoized answers k from the memo, or computes it and stores the answer.
func (x *Index) memoized(k memoKey, compute func() (int64, bool, error)) (int64, bool, error) {
	if v, ok := x.memo.get(k); ok {
		return v.off, v.ok, nil
	}
	v := x.memo.stamp(k.tp)
	off, ok, err := compute()
	if err != nil {
		return off, ok, err
	}
	v.off, v.ok = off, ok
	x.memo.put(k, v)
	return off, ok, nil
}

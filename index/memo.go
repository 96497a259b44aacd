package index

import "sync"

// memo keeps, per partition, the resolved view of its readable segments
// (resolve.go), from which LogStart, LogEnd and the lookups by offset and
// timestamp answer, and the answer of LogStartOffset. The broker asks for
// LogStart, LogEnd and LogStartOffset for each tiered partition of every
// fetch, and they change only when that partition's segments or log start
// offset are written. Without the memo each answer is a Badger iterator
// over the partition's segments; in the tier bench those lookups took a
// sixth of the broker's CPU time during a cold read.
//
// Every write that can change a partition's answers bumps the partition's
// generation once it has been applied (ForgetTopic bumps all of them). An
// answer or view is stored with the generations read before it was
// computed and is used only while they are still current, so one computed
// from a snapshot older than a write is never used after that write
// returns.
//
// Views are bounded: past maxMemoViewSize (segments, pieces and missing
// marks, some 50 bytes each) the views of other partitions are dropped,
// to be built again when next asked for.
type memo struct {
	mu     sync.Mutex
	global uint64                      // bumped by writes to any partition
	gens   map[TopicIDPartition]uint64 // bumped by writes to one partition
	vals   map[memoKey]memoVal

	views    map[TopicIDPartition]memoView
	viewSize int                                // the sum of the views' sizes
	building map[TopicIDPartition]chan struct{} // views being built, closed when done
}

const maxMemoViewSize = 1 << 20

type memoKind uint8

const (
	memoLogStartOffset memoKind = iota
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

type memoView struct {
	global, gen uint64
	v           *partView
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

// view returns tp's view if a current one is stored.
func (m *memo) view(tp TopicIDPartition) (*partView, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.views[tp]
	if !ok || e.global != m.global || e.gen != m.gens[tp] {
		return nil, false
	}
	return e.v, true
}

// beginView returns the stamp to store a view of tp built from now on
// with, or, when another caller is building one, a channel closed when it
// is done.
func (m *memo) beginView(tp TopicIDPartition) (memoVal, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch, ok := m.building[tp]; ok {
		return memoVal{}, ch
	}
	if m.building == nil {
		m.building = map[TopicIDPartition]chan struct{}{}
	}
	m.building[tp] = make(chan struct{})
	return memoVal{global: m.global, gen: m.gens[tp]}, nil
}

// endView ends beginView's build: it stores v (when the build did not fail
// and no write bumped the generations since stamp) and wakes the callers
// waiting for it.
func (m *memo) endView(tp TopicIDPartition, stamp memoVal, v *partView, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	close(m.building[tp])
	delete(m.building, tp)
	if err != nil || stamp.global != m.global || stamp.gen != m.gens[tp] {
		return
	}
	if m.views == nil {
		m.views = map[TopicIDPartition]memoView{}
	}
	m.dropView(tp)
	for other := range m.views {
		if m.viewSize+v.size() <= maxMemoViewSize {
			break
		}
		m.dropView(other)
	}
	m.views[tp] = memoView{global: stamp.global, gen: stamp.gen, v: v}
	m.viewSize += v.size()
}

func (m *memo) dropView(tp TopicIDPartition) {
	if e, ok := m.views[tp]; ok {
		m.viewSize -= e.v.size()
		delete(m.views, tp)
	}
}

// touch invalidates tp's answers and view; called after each write to tp.
func (m *memo) touch(tp TopicIDPartition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gens == nil {
		m.gens = map[TopicIDPartition]uint64{}
	}
	m.gens[tp]++
	delete(m.vals, memoKey{tp, memoLogStartOffset})
	m.dropView(tp)
}

// touchAll invalidates every answer and view.
func (m *memo) touchAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.global++
	clear(m.gens) // every stored answer is stale by global already
	clear(m.vals)
	clear(m.views)
	m.viewSize = 0
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

package txn

import (
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestStateNames(t *testing.T) {
	want := []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}
	for i, n := range want {
		if got := State(i).String(); got != n {
			t.Errorf("State(%d) = %s, want %s", i, got, n)
		}
		if s, ok := StateByName(n); !ok || s != State(i) {
			t.Errorf("StateByName(%s) = %v, %v", n, s, ok)
		}
	}
	if State(8).String() != "Unknown" || State(-1).valid() {
		t.Error("out-of-range states")
	}
	if _, ok := StateByName("Stable"); ok {
		t.Error("StateByName(Stable)")
	}
}

// Every (from, to) pair against Kafka's table of valid previous states.
func TestTransitionTable(t *testing.T) {
	E, O, PC, PA, CC, CA, D, PF := Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence
	allowed := map[[2]State]bool{
		{E, E}: true, {CC, E}: true, {CA, E}: true,
		{O, O}: true, {E, O}: true, {CC, O}: true, {CA, O}: true,
		{O, PC}: true,
		{O, PA}: true, {PF, PA}: true, {E, PA}: true, {CC, PA}: true, {CA, PA}: true,
		{PC, CC}: true,
		{PA, CA}: true,
		{E, D}:   true, {CA, D}: true, {CC, D}: true,
		{O, PF}: true,
	}
	for from := E; from <= PF; from++ {
		for to := E; to <= PF; to++ {
			if got := canTransition(from, to); got != allowed[[2]State{from, to}] {
				t.Errorf("%v -> %v: %v", from, to, got)
			}
		}
	}
	if canTransition(E, State(9)) {
		t.Error("transition to an unknown state")
	}
	for s, want := range map[State]bool{E: true, CC: true, CA: true, O: false, PC: false, PA: false, D: false, PF: false} {
		if s.expirationAllowed() != want {
			t.Errorf("%v expirationAllowed = %v", s, !want)
		}
	}
}

func metaAt(state State, pid int64, epoch, lastEpoch int16) *meta {
	m := newMeta("id", pid, 1000, 1)
	m.state, m.producerEpoch, m.lastProducerEpoch = state, epoch, lastEpoch
	if state == Ongoing || state == PrepareCommit || state == PrepareAbort {
		m.startMs = 1
		m.partitions[tp("t", 0)] = struct{}{}
	}
	return m
}

func ptr[T any](v T) *T { return &v }

// InitProducerId's epoch rules (prepareIncrementEpoch), KIP-360 included.
func TestPrepareIncrementEpoch(t *testing.T) {
	for _, tc := range []struct {
		name               string
		epoch, last        int16
		expected           *int16
		wantEpoch, wantLst int16
		wantErr            error
	}{
		{"new producer", -1, -1, nil, 0, -1, nil},
		{"bump, no expectation", 4, 3, nil, 5, -1, nil},
		{"recovering producer, current epoch", 4, -1, ptr[int16](4), 5, 4, nil},
		{"new id, any expectation", -1, -1, ptr[int16](7), 0, -1, nil},
		{"retry of a bump", 5, 4, ptr[int16](4), 5, 4, nil},
		{"zombie", 5, 4, ptr[int16](2), 0, 0, kerr.ProducerFenced},
		{"exhausted", math.MaxInt16 - 1, -1, nil, 0, 0, errors.New("exhausted")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metaAt(CompleteCommit, 1, tc.epoch, tc.last)
			m.startMs = 10
			got, err := m.prepareIncrementEpoch(2000, tc.expected, 99)
			if tc.wantErr != nil {
				if err == nil || (errors.Is(tc.wantErr, kerr.ProducerFenced) && !errors.Is(err, kerr.ProducerFenced)) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if m.hasPending {
					t.Fatal("refused transition left pending")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.producerEpoch != tc.wantEpoch || got.lastProducerEpoch != tc.wantLst || got.state != Empty ||
				got.timeoutMs != 2000 || got.startMs != -1 || got.lastUpdateMs != 99 || got.prevProducerID != 1 {
				t.Fatalf("transit %+v", got)
			}
			if !m.hasPending || m.pending != Empty {
				t.Fatal("not pending")
			}
			if err := m.complete(got); err != nil {
				t.Fatal(err)
			}
			if m.producerEpoch != tc.wantEpoch || m.hasPending {
				t.Fatalf("after complete %+v", m)
			}
		})
	}
}

func TestPrepareRefusesWhilePending(t *testing.T) {
	m := metaAt(Empty, 1, 0, -1)
	tr, err := m.prepareAddPartitions([]TopicPartition{tp("t", 0)}, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.prepareAddPartitions([]TopicPartition{tp("t", 1)}, 5, 0); !errors.Is(err, errPendingTransition) {
		t.Fatalf("second prepare: %v", err)
	}
	m.abandon()
	if m.state != Empty || m.hasPending {
		t.Fatal("abandon changed the state")
	}
	if _, err := m.prepareAddPartitions(nil, 5, 0); err != nil {
		t.Fatalf("after abandon: %v", err)
	}
	// A transit prepared earlier for the same target state completes
	// (only the pending target is checked, and Kafka's rules).
	if err := m.complete(tr); err != nil {
		t.Fatal(err)
	}
	if m.state != Ongoing || m.startMs != 5 {
		t.Fatalf("%+v", m)
	}
}

// A transition that is not in Kafka's table is refused when prepared.
func TestPrepareIllegal(t *testing.T) {
	for _, tc := range []struct {
		from State
		do   func(m *meta) (txnState, error)
	}{
		{Empty, func(m *meta) (txnState, error) { return m.prepareEnd(PrepareCommit, 0, -1, 1, false) }},
		{Ongoing, func(m *meta) (txnState, error) { return m.prepareComplete(1) }},
		{Ongoing, func(m *meta) (txnState, error) { return m.prepareDead() }},
		{PrepareCommit, func(m *meta) (txnState, error) { return m.prepareAddPartitions(nil, 1, 0) }},
		{PrepareAbort, func(m *meta) (txnState, error) { return m.prepareIncrementEpoch(1, nil, 1) }},
		{CompleteAbort, func(m *meta) (txnState, error) { return m.prepareFenceEpoch() }},
		{Ongoing, func(m *meta) (txnState, error) { return m.prepareRotation(2, 1, 1, false) }},
	} {
		m := metaAt(tc.from, 1, 0, -1)
		if _, err := tc.do(m); err == nil {
			t.Errorf("from %v: accepted", tc.from)
		}
		if m.hasPending {
			t.Errorf("from %v: refused transition left pending", tc.from)
		}
	}
}

func TestFenceEpoch(t *testing.T) {
	m := metaAt(Ongoing, 1, 3, -1)
	tr, err := m.prepareFenceEpoch()
	if err != nil || tr.producerEpoch != 4 || tr.state != PrepareEpochFence {
		t.Fatalf("fence: %+v %v", tr, err)
	}
	if err := m.complete(tr); err == nil {
		t.Fatal("PrepareEpochFence completed")
	}
	// After a fence whose write failed, the next does not bump again.
	m.failedFence = true
	if tr, _ := m.prepareFenceEpoch(); tr.producerEpoch != 3 {
		t.Fatalf("fence after a failed one bumped to %d", tr.producerEpoch)
	}
	m.abandon()
	m.failedFence, m.producerEpoch = false, math.MaxInt16
	if tr, _ := m.prepareFenceEpoch(); tr.producerEpoch != math.MaxInt16 {
		t.Fatalf("fence at MaxInt16 went to %d", tr.producerEpoch)
	}
}

func TestPrepareEndEpochs(t *testing.T) {
	// Transaction version 2 bumps; before, not.
	for _, tc := range []struct {
		tv          int16
		epoch       int16
		to          State
		want, wantL int16
	}{
		{0, 3, PrepareCommit, 3, -1},
		{2, 3, PrepareCommit, 4, 3},
		{2, 3, PrepareAbort, 4, 3},
		{2, math.MaxInt16, PrepareAbort, math.MaxInt16, math.MaxInt16}, // a broken producer can still abort
	} {
		m := metaAt(Ongoing, 1, tc.epoch, -1)
		tr, err := m.prepareEnd(tc.to, tc.tv, -1, 7, false)
		if err != nil || tr.producerEpoch != tc.want || tr.lastProducerEpoch != tc.wantL || tr.startMs != 1 {
			t.Errorf("tv %d epoch %d to %v: %+v %v", tc.tv, tc.epoch, tc.to, tr, err)
			continue
		}
		if err := m.complete(tr); err != nil {
			t.Errorf("complete: %v", err)
		}
	}
	// An abort with nothing added starts (and ends) now.
	m := metaAt(CompleteCommit, 1, 3, -1)
	m.startMs = 1
	tr, err := m.prepareEnd(PrepareAbort, 2, -1, 7, true)
	if err != nil || tr.startMs != 7 {
		t.Fatalf("empty abort: %+v %v", tr, err)
	}
	if err := m.complete(tr); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareCompleteOverflow(t *testing.T) {
	m := metaAt(Ongoing, 1, math.MaxInt16-1, -1)
	tr, err := m.prepareEnd(PrepareCommit, 2, 77, 5, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.complete(tr); err != nil {
		t.Fatal(err)
	}
	if m.producerEpoch != math.MaxInt16 || m.nextProducerID != 77 {
		t.Fatalf("prepared %+v", m)
	}
	tr, err = m.prepareComplete(6)
	if err != nil {
		t.Fatal(err)
	}
	if tr.producerID != 77 || tr.producerEpoch != 0 || tr.prevProducerID != 1 || tr.nextProducerID != -1 ||
		tr.lastProducerEpoch != math.MaxInt16-1 || len(tr.partitions) != 0 {
		t.Fatalf("complete transit %+v", tr)
	}
	if err := m.complete(tr); err != nil {
		t.Fatal(err)
	}
	if m.state != CompleteCommit || m.producerID != 77 {
		t.Fatalf("%+v", m)
	}
}

// complete refuses a transit that breaks Kafka's checks (a bug), and
// applies nothing.
func TestCompleteChecks(t *testing.T) {
	m := metaAt(Ongoing, 1, 3, -1)
	tr, _ := m.prepareAddPartitions([]TopicPartition{tp("u", 1)}, 5, 0)
	tr.timeoutMs++ // AddPartitions never changes the timeout
	if err := m.complete(tr); err == nil {
		t.Fatal("changed timeout accepted")
	}
	if m.hasPending || len(m.partitions) != 1 {
		t.Fatalf("state changed: %+v", m)
	}
	tr, _ = m.prepareAddPartitions(nil, 5, 0)
	tr.producerEpoch = 9
	if err := m.complete(tr); err == nil {
		t.Fatal("other epoch accepted")
	}
	if err := m.complete(tr); err == nil {
		t.Fatal("completed with nothing pending")
	}
}

func TestCodeForVersion(t *testing.T) {
	fenced, epoch := kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code
	for _, tc := range []struct {
		api, version, code, want int16
	}{
		{22, 3, fenced, epoch}, {22, 4, fenced, fenced},
		{24, 1, fenced, epoch}, {24, 2, fenced, fenced},
		{25, 1, fenced, epoch}, {26, 1, fenced, epoch}, {26, 5, fenced, fenced},
		{28, 2, fenced, epoch}, {28, 3, fenced, fenced},
		{22, 0, kerr.ConcurrentTransactions.Code, kerr.ConcurrentTransactions.Code},
		{0, 0, fenced, fenced}, // not a transactional API
	} {
		if got := CodeForVersion(tc.api, tc.version, tc.code); got != tc.want {
			t.Errorf("CodeForVersion(%d, %d, %d) = %d, want %d", tc.api, tc.version, tc.code, got, tc.want)
		}
	}
}

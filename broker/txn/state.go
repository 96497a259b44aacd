package txn

// The states of a transactional id, with Kafka's ids (the value's
// TransactionStatus) and names (what DescribeTransactions shows).

// State is a transaction's state.
type State int8

const (
	Empty             State = 0 // no transaction yet, or InitProducerId since the last one
	Ongoing           State = 1 // partitions added; records may be written
	PrepareCommit     State = 2 // EndTxn(commit) persisted; markers being written
	PrepareAbort      State = 3 // EndTxn(abort), a fence or a timeout persisted; markers being written
	CompleteCommit    State = 4 // commit markers written
	CompleteAbort     State = 5 // abort markers written
	Dead              State = 6 // being expired (transactional.id.expiration.ms); never persisted
	PrepareEpochFence State = 7 // fencing an ongoing transaction; never persisted
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) String() string {
	if s.valid() {
		return stateNames[s]
	}
	return "Unknown"
}

func (s State) valid() bool { return s >= Empty && s <= PrepareEpochFence }

// StateByName is the state of a Kafka state name (ListTransactions'
// filter), false if none.
func StateByName(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// validPrevious lists, for each state, the states it may be entered from
// (Kafka's TransactionState.validPreviousStates).
var validPrevious = [...][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort},
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteAbort, CompleteCommit},
	PrepareEpochFence: {Ongoing},
}

// canTransition tells whether Kafka allows from -> to.
func canTransition(from, to State) bool {
	if !to.valid() {
		return false
	}
	for _, s := range validPrevious[to] {
		if s == from {
			return true
		}
	}
	return false
}

// expirationAllowed: a transactional id in this state may expire.
func (s State) expirationAllowed() bool {
	return s == Empty || s == CompleteCommit || s == CompleteAbort
}

// pendingTxn: a transaction is open or ending.
func (s State) pendingTxn() bool {
	return s == Ongoing || s == PrepareCommit || s == PrepareAbort
}

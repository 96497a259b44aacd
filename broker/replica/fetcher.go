package replica

// Follower side of replication: one fetcher per leader broker replicates
// the partitions this broker follows from it. A partition that starts
// following a leader epoch first truncates its divergent tail with
// OffsetForLeaderEpoch (KIP-101/KIP-279), then fetches from its log end
// with its replica id, appends with AppendReplicated (batches keep their
// offsets and leader epochs) and takes min(leader's high watermark, own log
// end) as its high watermark. A fetch answered OFFSET_MOVED_TO_TIERED_STORAGE
// (its offset is below the leader's local log start of a tiered
// partition) first rebuilds the log from the leader's local tail
// (fetcher_tier.go).

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	replicaFetchMaxBytes = 1 << 20  // replica.fetch.max.bytes default
	replicaRespMaxBytes  = 10 << 20 // replica.fetch.response.max.bytes default
	replicaFetchBackoff  = 100 * time.Millisecond
	// refusalWarnEvery is how often a fetcher whose fetches the leader's
	// authorizer refuses says so again.
	refusalWarnEvery = 10 * time.Second
)

// followPart is one partition a fetcher replicates.
type followPart struct {
	p         *Partition
	epoch     int32 // leader epoch being followed
	truncated bool  // the divergent tail has been truncated for epoch
	// fromTier: the leader answered OFFSET_MOVED_TO_TIERED_STORAGE; the
	// log is rebuilt from the leader's local tail first (fetcher_tier.go).
	fromTier bool
	// lastTiered: the rebuild starts at the leader's last tiered offset
	// rather than its local log start (an empty replica, fetcher_tier.go);
	// tailChecked: that choice was made for this epoch.
	lastTiered, tailChecked bool
	tierRetry               time.Time // a failed rebuild is retried from then on
	logStart                int64     // the leader's log start offset, once followed (followLogStart)
}

// fetcher replicates from one leader broker.
type fetcher struct {
	m      *Manager
	leader int32

	mu    sync.Mutex // guards parts and refusedWarned; held while applying a response
	parts map[tp]*followPart
	wake  chan struct{}
	// refusedWarned is when a refusal of this broker's fetches by the
	// leader's authorizer was last logged (refusalWarnEvery).
	refusedWarned time.Time

	cancel context.CancelFunc
	done   chan struct{}
}

// Follow makes p replicate from leader at epoch, moving it from any other
// fetcher. Called by the broker's reconcile (with the partition set
// locked, see Edit; fetchers never take that lock).
func (m *Manager) Follow(p *Partition, leader, epoch int32) {
	k := tp{p.topic, p.index}
	m.fmu.Lock()
	defer m.fmu.Unlock()
	for id, f := range m.fetchers {
		if id != leader {
			m.removeFollowed(f, k)
		}
	}
	if leader < 0 {
		return
	}
	f := m.fetchers[leader]
	if f == nil {
		ctx, cancel := context.WithCancel(m.ctx)
		f = &fetcher{m: m, leader: leader, parts: map[tp]*followPart{}, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
		m.fetchers[leader] = f
		m.wg.Add(1) // callers run inside the broker's WaitGroup (Start, watchMetadata) or in a connection's handler, which the broker's Close waits for before it
		go f.run(ctx)
	}
	f.mu.Lock()
	if fp := f.parts[k]; fp == nil || fp.epoch != epoch || fp.p != p {
		f.parts[k] = &followPart{p: p, epoch: epoch}
	}
	f.mu.Unlock()
	f.poke()
}

// Unfollow stops replicating the partition of topic (it leads now, or is
// no longer a replica).
func (m *Manager) Unfollow(topic string, part int32) {
	k := tp{topic, part}
	m.fmu.Lock()
	defer m.fmu.Unlock()
	for _, f := range m.fetchers {
		m.removeFollowed(f, k)
	}
}

// removeFollowed drops k from f and ends f when it has nothing left to
// fetch. Called with fmu held.
func (m *Manager) removeFollowed(f *fetcher, k tp) {
	if f.remove(k) == 0 {
		f.cancel()
		delete(m.fetchers, f.leader)
	}
}

// StopFetchers ends every fetcher and waits for them.
func (m *Manager) StopFetchers() {
	m.fmu.Lock()
	fs := m.fetchers
	m.fetchers = map[int32]*fetcher{}
	m.fmu.Unlock()
	for _, f := range fs {
		f.cancel()
		<-f.done
	}
}

// PauseReplication stops (true) or resumes (false) every fetcher of this
// broker, as if the follower process were paused: for tests, and for
// controlled shutdown.
//
// Pausing is a barrier: once it returns, no fetched data is applied (a
// response being applied finishes first; later ones see the flag under
// the fetcher's lock and are dropped).
func (m *Manager) PauseReplication(paused bool) {
	m.replPaused.Store(paused)
	m.fmu.Lock()
	fs := make([]*fetcher, 0, len(m.fetchers))
	for _, f := range m.fetchers {
		f.poke()
		fs = append(fs, f)
	}
	m.fmu.Unlock()
	if paused {
		for _, f := range fs {
			f.mu.Lock()
			f.mu.Unlock() //nolint:staticcheck // waiting out an apply in progress
		}
	}
}

// remove drops k and returns how many partitions are left.
func (f *fetcher) remove(k tp) int {
	f.mu.Lock() // waits for a response being applied
	defer f.mu.Unlock()
	delete(f.parts, k)
	return len(f.parts)
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// wait blocks until poked, d passes or ctx ends.
func (f *fetcher) wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-f.wake:
	case <-t.C:
	}
}

func (f *fetcher) run(ctx context.Context) {
	defer f.m.wg.Done()
	defer close(f.done)
	var rc *Conn
	defer func() {
		if rc != nil {
			rc.Close()
		}
	}()
	for ctx.Err() == nil {
		f.mu.Lock()
		n := len(f.parts)
		f.mu.Unlock()
		if n == 0 || f.m.replPaused.Load() {
			if rc != nil {
				rc.Close()
				rc = nil
			}
			f.wait(ctx, time.Minute)
			continue
		}
		if rc == nil {
			c, err := f.dial(ctx)
			if err != nil {
				f.m.log.Debug("replica fetcher connect", "leader", f.leader, "err", err)
				f.wait(ctx, replicaFetchBackoff)
				continue
			}
			rc = c
		}
		backoff, err := f.round(ctx, rc)
		if err != nil {
			if ctx.Err() == nil {
				f.m.log.Debug("replica fetch", "leader", f.leader, "err", err)
			}
			rc.Close()
			rc = nil
			backoff = true
		}
		if backoff {
			f.wait(ctx, replicaFetchBackoff)
		}
	}
}

func (f *fetcher) dial(ctx context.Context) (*Conn, error) {
	var addr string
	if b, ok := f.m.metadata().Broker(f.leader); ok {
		addr = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		if f.m.brokerAddr != nil {
			addr = f.m.brokerAddr(b)
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("leader %d is not registered", f.leader)
	}
	var c net.Conn
	var err error
	if f.m.dial != nil {
		c, err = f.m.dial(ctx, "tcp", addr)
	} else {
		d := net.Dialer{Timeout: 5 * time.Second}
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("dial leader %d at %s: %w", f.leader, addr, err)
	}
	rc := NewConn(c, "strata-replica-"+strconv.Itoa(int(f.m.cfg.ID)))
	stop := context.AfterFunc(ctx, func() { c.Close() })
	rc.stop = stop
	return rc, nil
}

// snapshot copies the partitions to serve this round.
func (f *fetcher) snapshot() map[tp]followPart {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[tp]followPart, len(f.parts))
	for k, fp := range f.parts {
		out[k] = *fp
	}
	return out
}

// current returns the live entry for k if it still follows epoch with p.
// Called with f.mu held.
func (f *fetcher) current(k tp, want followPart) *followPart {
	fp := f.parts[k]
	if fp == nil || fp.epoch != want.epoch || fp.p != want.p {
		return nil
	}
	return fp
}

// round truncates partitions new to their epoch, then fetches once.
// backoff asks the caller to pause (errors from the leader).
func (f *fetcher) round(ctx context.Context, rc *Conn) (backoff bool, err error) {
	parts := f.snapshot()
	var untruncated []tp
	for k, fp := range parts {
		if !fp.truncated {
			untruncated = append(untruncated, k)
		}
	}
	if len(untruncated) > 0 {
		return f.truncate(rc, parts, untruncated)
	}
	f.markEmptyTiered(parts)
	// Partitions to rebuild from the leader's local tail first; they stay
	// out of the fetch until rebuilt, the others go on meanwhile.
	now := time.Now()
	var toBuild []tp
	for k, fp := range parts {
		if fp.fromTier && !now.Before(fp.tierRetry) {
			toBuild = append(toBuild, k)
		}
	}
	if len(toBuild) > 0 {
		if err := f.buildFromTier(ctx, rc, parts, toBuild); err != nil {
			return false, err
		}
		parts = f.snapshot()
	}
	rate, throttled := f.m.followerThrottled(f.m.metadata())
	hold := rate > 0 && f.m.followerThrottle.exceeded(rate, now)
	for k, fp := range parts {
		if fp.fromTier || !fp.truncated || hold && throttled(k.topic, k.part) {
			delete(parts, k) // over follower.replication.throttled.rate: not fetched for now
		}
	}
	if len(parts) == 0 {
		return true, nil
	}
	lag := time.Duration(f.m.cfg.ReplicaLagTimeMaxMs) * time.Millisecond
	wait := min(500*time.Millisecond, max(lag/2, 10*time.Millisecond))
	// v15 (KIP-903): the replica id and this broker's epoch, the czxid of
	// its registration, which the leader checks against the one it knows,
	// so that no one else can fetch as this follower; v13+ names topics
	// by id.
	req := kmsg.NewPtrFetchRequest()
	req.Version = 15
	req.ReplicaID = -1
	req.ReplicaState.ID, req.ReplicaState.Epoch = f.m.cfg.ID, f.m.ownBrokerEpoch()
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = replicaRespMaxBytes
	req.SessionEpoch = -1
	topics := map[string]int{}
	names := map[[16]byte]string{}
	for k, fp := range parts {
		i, ok := topics[k.topic]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = k.topic, fp.p.topicID
			names[rt.TopicID] = k.topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			topics[k.topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = k.part
		rp.CurrentLeaderEpoch = fp.epoch
		rp.FetchOffset = fp.p.log.LogEndOffset()
		rp.LogStartOffset = fp.p.log.LogStartOffset()
		rp.PartitionMaxBytes = replicaFetchMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := rc.RoundTrip(req, wait+10*time.Second)
	if err != nil {
		return false, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return true, fmt.Errorf("fetch: %w", kerr.ErrorForCode(resp.ErrorCode))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m.replPaused.Load() {
		return false, nil // paused while the fetch was out: drop what came
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			k := tp{names[rt.TopicID], rp.Partition}
			fp := f.current(k, parts[k])
			if fp == nil {
				continue
			}
			switch rp.ErrorCode {
			case 0:
				if rate > 0 && throttled(k.topic, k.part) {
					f.m.followerThrottle.record(rate, int64(len(rp.RecordBatches)), time.Now())
				}
				if err := f.apply(fp, rp); err != nil {
					f.m.log.Warn("replicate", "topic", k.topic, "partition", k.part, "err", err)
					backoff = true
				}
			case kerr.OffsetOutOfRange.Code:
				fp.truncated = false // find the common point again
				backoff = true
			case kerr.OffsetMovedToTieredStorage.Code:
				fp.fromTier = true // rebuild from the leader's local tail next round
			default:
				// Fenced or unknown epoch, not leader: wait for metadata.
				f.warnIfRefused(k, "Fetch", rp.ErrorCode)
				backoff = true
			}
		}
	}
	return backoff, nil
}

// warnIfRefused logs, at most every refusalWarnEvery, a refusal of this
// broker's replica requests by the leader's authorizer: its principal on
// the inter-broker listener lacks ClusterAction (is not in super.users),
// so it cannot replicate until an operator acts, and must not back off
// in silence (Kafka's fetcher logs an error). Called with f.mu held.
func (f *fetcher) warnIfRefused(k tp, request string, code int16) {
	if code != kerr.TopicAuthorizationFailed.Code && code != kerr.ClusterAuthorizationFailed.Code {
		return
	}
	if time.Since(f.refusedWarned) < refusalWarnEvery {
		return
	}
	f.refusedWarned = time.Now()
	f.m.log.Warn("replica fetch refused by the leader's authorizer: this broker's principal needs ClusterAction on the cluster (super.users)",
		"leader", f.leader, "request", request, "topic", k.topic, "partition", k.part, "err", kerr.ErrorForCode(code))
}

// apply appends fetched batches and moves the follower's high watermark.
// Called with f.mu held.
func (f *fetcher) apply(fp *followPart, rp kmsg.FetchResponseTopicPartition) error {
	p := fp.p
	if recs := wholeBatches(rp.RecordBatches); len(recs) > 0 {
		if _, err := p.log.AppendReplicated(recs); err != nil {
			return fmt.Errorf("append replicated: %w", err)
		}
		f.m.replicationBytesIn(len(recs))
		p.Wake()
	}
	p.SetHW(min(rp.HighWatermark, p.log.LogEndOffset()))
	return f.m.followLogStart(fp, rp.LogStartOffset)
}

// followLogStart moves a follower's log start offset up to the leader's,
// as Kafka's follower does (maybeIncrementLogStartOffset), so that
// records DeleteRecords removed, or that retention deleted, do not come
// back when this replica leads: the local log start, never past the
// follower's high watermark, and for a tiered partition (whose log start
// may lie below the local log) the remote index's log start offset too.
// Called with the fetcher's lock held.
func (m *Manager) followLogStart(fp *followPart, leaderStart int64) error {
	if leaderStart <= fp.logStart {
		return nil // nothing new (the common case: one comparison per fetch)
	}
	p := fp.p
	if m.tier.RemoteReadable(p) {
		if err := m.tier.RaiseRemoteLogStart(p, leaderStart); err != nil {
			return fmt.Errorf("remote index: record the leader's log start offset %d: %w", leaderStart, err)
		}
	}
	if to := min(leaderStart, p.hw.Load(), p.log.LogEndOffset()); to > p.log.LogStartOffset() {
		if _, err := p.log.DeleteRecordsBefore(to); err != nil {
			return fmt.Errorf("follow the leader's log start offset %d: %w", leaderStart, err)
		}
	}
	if leaderStart <= p.hw.Load() {
		fp.logStart = leaderStart // done; a start above the HW is applied as the HW catches up
	}
	return nil
}

// wholeBatches drops a partial batch at the end of fetched records.
func wholeBatches(b []byte) []byte {
	n := 0
	for len(b)-n >= 12 {
		size := 12 + int(int32(binary.BigEndian.Uint32(b[n+8:n+12])))
		if size < 12 || len(b)-n < size {
			break
		}
		n += size
	}
	return b[:n]
}

// truncate asks the leader where this broker's log diverges from its own
// and truncates to there (KIP-279): the end offset of the latest epoch the
// two logs share.
func (f *fetcher) truncate(rc *Conn, parts map[tp]followPart, keys []tp) (bool, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 4
	req.ReplicaID = f.m.cfg.ID
	topics := map[string]int{}
	for _, k := range keys {
		i, ok := topics[k.topic]
		if !ok {
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = k.topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			topics[k.topic] = i
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition = k.part
		rp.CurrentLeaderEpoch = parts[k].epoch
		rp.LeaderEpoch = parts[k].p.log.LatestEpoch()
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := rc.RoundTrip(req, 10*time.Second)
	if err != nil {
		return false, err
	}
	resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
	backoff := false
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			k := tp{rt.Topic, rp.Partition}
			fp := f.current(k, parts[k])
			if fp == nil {
				continue
			}
			if rp.ErrorCode != 0 {
				f.warnIfRefused(k, "OffsetForLeaderEpoch", rp.ErrorCode)
				backoff = true
				continue
			}
			p := fp.p
			to := p.log.LogEndOffset()
			switch {
			case rp.LeaderEpoch < 0 || rp.EndOffset < 0:
				to = min(to, p.hw.Load()) // no common epoch known: keep what was committed
			default:
				_, own := p.log.EndOffsetForEpoch(rp.LeaderEpoch)
				to = min(to, rp.EndOffset, own)
			}
			if to < p.log.LogEndOffset() {
				f.m.log.Info("truncating divergent log", "topic", k.topic, "partition", k.part, "from", p.log.LogEndOffset(), "to", to, "leader_epoch", fp.epoch)
				if err := p.log.Truncate(to); err != nil {
					f.m.log.Error("truncate", "topic", k.topic, "partition", k.part, "err", err)
					backoff = true
					continue
				}
			}
			if hw := p.hw.Load(); hw > p.log.LogEndOffset() {
				p.hw.Store(p.log.LogEndOffset())
			}
			fp.truncated = true
		}
	}
	return backoff, nil
}

// Conn is a raw Kafka connection to another broker: a leader, for a
// fetcher, or the controller, for the broker's controlled shutdown.
type Conn struct {
	conn net.Conn
	r    *bufio.Reader
	fmt  *kmsg.RequestFormatter
	corr int32
	buf  []byte
	stop func() bool
}

// NewConn makes a Conn of c, whose requests carry clientID.
func NewConn(c net.Conn, clientID string) *Conn {
	return &Conn{conn: c, r: bufio.NewReader(c), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)), stop: func() bool { return true }}
}

// Close closes the connection.
func (c *Conn) Close() {
	c.stop()
	c.conn.Close()
}

// RoundTrip sends req and reads its response within timeout.
func (c *Conn) RoundTrip(req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	c.corr++
	c.buf = c.fmt.AppendRequest(c.buf[:0], req, c.corr)
	c.conn.SetDeadline(time.Now().Add(timeout))
	if _, err := c.conn.Write(c.buf); err != nil {
		return nil, fmt.Errorf("send %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > replicaRespMaxBytes*2 {
		return nil, fmt.Errorf("%s response of %d bytes", kmsg.NameForKey(req.Key()), n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return nil, fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	rd := kbin.Reader{Src: body}
	if corr := rd.Int32(); corr != c.corr {
		return nil, fmt.Errorf("%s response: correlation id %d, want %d", kmsg.NameForKey(req.Key()), corr, c.corr)
	}
	resp := req.ResponseKind()
	if resp.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if !rd.Ok() {
		return nil, errors.New("malformed response header")
	}
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

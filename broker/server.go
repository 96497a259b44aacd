package broker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"strata/broker/acl"
	"strata/broker/config"
	"strata/broker/network"
	"strata/broker/plog"
	"strata/broker/replica"
	"strata/controller"
	"strata/internal/vfs"
	"strata/tier"
)

// Options configure a Server. cmd/strata fills them from flags.
type Options struct {
	// Config is the static broker configuration (server.properties and
	// --set); dynamic overrides come from the controller's metadata.
	Config *config.Broker
	// Listen, if set, is the address the first listener binds instead of
	// its configured one ("127.0.0.1:0" picks a free port). The
	// listeners are Config.Listeners (listeners.go).
	Listen string
	// Advertise, if set, is the address clients of the first listener
	// are told to use; else advertised.listeners, else the bound address.
	// A wildcard or empty host (0.0.0.0, ::) is replaced by a reachable
	// one (advertisedHost).
	Advertise string
	// Controller owns metadata. Nil means an embedded single-node
	// controller in the data directory.
	Controller controller.Controller
	// NewController, if set and Controller is nil, makes the controller
	// once the listener is bound and this broker's address is known (the
	// ZooKeeper controller registers that address).
	NewController func(self controller.Broker) (controller.Controller, error)
	// TierStore is the object store of tiered storage (--tier); nil means
	// none. It is used when remote.log.storage.system.enable is true
	// (broker/remotelog).
	TierStore tier.ObjectStore
	// FS is the filesystem for partition logs; nil means the OS.
	FS     vfs.FS
	Logger *slog.Logger
}

type tp struct {
	topic string
	part  int32
}

// Server is one broker.
type Server struct {
	leaderCheck leaderCheck // leader_check.go; housekeeping's alone
	opts        Options
	cfg         *config.Broker
	log         *slog.Logger
	fs          vfs.FS
	ctrl        controller.Controller
	// listeners are bound in Start (listeners.go); started is set once
	// they serve.
	listeners []boundListener
	started   bool
	// logsLoaded is set once Start has opened the partitions (/readyz).
	logsLoaded atomic.Bool
	// tlsByListener are the SSL listeners' TLS, loaded in New so that a
	// bad keystore stops the broker before anything starts.
	tlsByListener map[string]*network.TLS
	self          controller.Broker
	metrics       *metrics

	// replicas holds the partitions this broker hosts and replicates
	// them (package replica; replicas.go).
	replicas *replica.Manager

	sessions *fetchSessions

	// startedMs is when this broker started; draining is true while a
	// drain asked after that is in force (drain.go).
	startedMs int64
	draining  atomic.Bool
	// futureDrainWarned is the future drain marker last warned about.
	futureDrainWarned atomic.Int64
	// maxFetchWait caps a fetch's long poll (0 = the request's MaxWait);
	// tests set it.
	maxFetchWait time.Duration

	pidMu   sync.Mutex
	pidNext int64
	pidEnd  int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// network accepts and serves the connections (broker/network): the
	// connection limits, queued.max.request.bytes, fetch copy buffers.
	network *network.Server

	groups *groupsHost // group coordinator (groups.go)
	txns   *txnHost    // transaction coordinator (txns.go)

	ldir logDirState // offline after an I/O error (logdir.go)

	tier *tierState // tiered storage (remotelog_glue.go, package remotelog); nil when off

	dirLock *dataDirLock // <data-dir>/.lock, held until Close (datadir_lock.go)

	authz *acl.Authorizer // authorizer.class.name's; nil: none, all allowed (authz.go)
}

// brokerRegistrar is implemented by controllers that learn a broker's
// address when it starts (the in-memory test controller); the ZooKeeper
// controller registers brokers itself.
type brokerRegistrar interface {
	RegisterBroker(ctx context.Context, b controller.Broker) error
}

// New validates options and opens the data directory; Start listens.
func New(opts Options) (*Server, error) {
	if opts.Config == nil {
		return nil, errors.New("broker: no config")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.FS == nil {
		opts.FS = vfs.OS
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:      opts,
		startedMs: time.Now().UnixMilli(),
		cfg:       opts.Config,
		log:       opts.Logger,
		fs:        opts.FS,
		ctrl:      opts.Controller,
		sessions:  newFetchSessions(1000),
		ctx:       ctx,
		cancel:    cancel,
		metrics:   newMetrics(),
	}
	s.replicas = s.newReplicaManager()
	s.network = network.New(network.Options{
		Config:       s.cfg,
		Logger:       s.log,
		Context:      ctx,
		Handler:      dispatcher{s},
		Limits:       s.connLimits,
		DecodeCharge: decodeCharge,
		ConnOpened:   s.metrics.connections.Inc,
		ConnClosed:   s.metrics.connections.Dec,
	})
	tlss, err := s.listenerTLS() // listeners.go
	if err != nil {
		return nil, err
	}
	s.tlsByListener = tlss
	if err := os.MkdirAll(s.cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	// Before anything else reads or writes the data directory.
	lock, err := lockDataDir(s.cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s.dirLock = lock
	if err := s.openTier(); err != nil {
		lock.release()
		return nil, err
	}
	s.groups = newGroupsHost(s)
	s.txns = newTxnHost(s)
	return s, nil
}

// Start binds the listener, opens the controller and the partitions, and
// starts accepting connections. It returns once requests can be served.
func (s *Server) Start() error {
	if s.tier != nil {
		s.log.Info("tiered storage", "store", s.tier.store.String())
	}
	if err := s.bindListeners(); err != nil { // listeners.go
		return err
	}
	s.self = controller.Broker{ID: s.cfg.ID, Host: s.listeners[0].adv.Host, Port: s.listeners[0].adv.Port, Rack: s.cfg.Rack}
	for _, b := range s.listeners {
		s.self.Endpoints = append(s.self.Endpoints, b.adv)
	}
	defer func() {
		if !s.started {
			s.closeListeners()
		}
	}()
	if s.ctrl == nil && s.opts.NewController != nil {
		if s.cfg.ZooKeeperConnect != "" {
			s.log.Info("controller", "mode", "zookeeper", "connect", s.cfg.ZooKeeperConnect)
		}
		c, err := s.opts.NewController(s.self)
		if err != nil {
			return err
		}
		s.ctrl = c
	}
	if s.ctrl == nil {
		s.log.Info("controller", "mode", "embedded")
		e, err := controller.OpenEmbedded(s.cfg.DataDir, s.self)
		if err != nil {
			return err
		}
		s.ctrl = e
	}
	s.registerStateMetrics()                    // metrics.go, once the controller exists
	if err := s.startAuthorizer(); err != nil { // authz.go
		return err
	}
	if r, ok := s.ctrl.(brokerRegistrar); ok {
		if err := r.RegisterBroker(s.ctx, s.self); err != nil {
			return fmt.Errorf("register broker: %w", err)
		}
	}
	opening := time.Now()
	s.loadHWCheckpoint()        // before partitions open
	changes := s.ctrl.Changes() // before reading: no change goes unseen
	if err := s.reconcile(s.ctrl.Metadata()); err != nil {
		return err
	}
	s.wg.Add(4)
	go s.replicas.RunISRExpiry()
	s.serveListeners()
	s.started = true
	go s.watchMetadata(changes)
	go s.housekeeping()
	go s.cleanerLoop()
	if s.tier != nil {
		s.wg.Add(2)
		go s.tierLoop()
		go s.snapshotLoop() // metadata_snapshot.go
	}
	s.waitReady()                   // partitions open as the controller says
	s.replicas.StartHWCheckpoints() // after they opened with their checkpointed HW
	// One line for all partitions; each partition's log says its own at
	// debug.
	s.log.Info("opened partitions", "partitions", len(s.allPartitions()), "took", time.Since(opening).Round(time.Millisecond))
	s.logsLoaded.Store(true) // ready.go
	return nil
}

// readyWaiter is a controller that learns the cluster after the broker
// starts accepting (ZooKeeper mode: the controller's first UpdateMetadata).
type readyWaiter interface{ WaitReady(context.Context) error }

// waitReady holds Start until the controller knows the cluster, so that
// the broker does not announce itself ready with no topics; after
// zookeeper.connection.timeout.ms it goes on anyway (the metadata comes
// when the controller sends it).
func (s *Server) waitReady() {
	rw, ok := s.ctrl.(readyWaiter)
	if !ok {
		return
	}
	d := time.Duration(s.cfg.ZooKeeperConnectionTimeoutMs) * time.Millisecond
	if d <= 0 {
		d = 18 * time.Second
	}
	ctx, cancel := context.WithTimeout(s.ctx, d)
	defer cancel()
	if err := rw.WaitReady(ctx); err != nil {
		s.log.Warn("starting before the controller sent the cluster metadata", "err", err)
		return
	}
	s.applyNow()
}

// Addr is the bound address of the first listener.
func (s *Server) Addr() net.Addr { return s.listeners[0].ln.Addr() }

// AdvertisedAddr is the HOST:PORT this broker gives clients of its first
// listener in Metadata.
func (s *Server) AdvertisedAddr() string {
	return net.JoinHostPort(s.self.Host, strconv.Itoa(int(s.self.Port)))
}

// advertisedHost is the host advertised for a listener on every interface
// (0.0.0.0, :: or an empty host), where the bound address is of no use
// to a client. Like Kafka, which advertises the machine's canonical host
// name then, it is the host name if that resolves; else the first
// non-loopback interface address (IPv4 first); else 127.0.0.1.
func advertisedHost() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		addrs, err := net.DefaultResolver.LookupHost(ctx, h)
		cancel()
		if err == nil && len(addrs) > 0 {
			return h
		}
	}
	var v6 string
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || !n.IP.IsGlobalUnicast() { // not loopback, link-local or unspecified
				continue
			}
			if n.IP.To4() != nil {
				return n.IP.String()
			}
			if v6 == "" {
				v6 = n.IP.String()
			}
		}
	}
	if v6 != "" {
		return v6
	}
	return "127.0.0.1"
}

// Close stops accepting, closes connections and closes every log cleanly.
func (s *Server) Close() error {
	s.controlledShutdown()
	s.cancel()
	s.finalGroupSnapshots() // the commits since the snapshot loop's last check
	s.groups.close()        // answers waiting JoinGroup/SyncGroup requests
	s.txns.close()
	s.closeListeners()
	s.network.Close() // stops accepting, closes the connections
	s.replicas.StopFetchers()
	// The connections' handlers first: they may start goroutines counted
	// in s.wg (a fetcher, an ISR change, a restore), which must not be
	// added once s.wg.Wait has begun.
	s.network.Wait()
	s.wg.Wait()
	s.replicas.FinalHWCheckpoint()
	var errs []error
	ps := s.replicas.Edit()
	for _, p := range ps.All() {
		if err := p.Log().Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s-%d: %w", p.Topic(), p.Index(), err))
		}
		ps.Remove(p.Topic(), p.Index())
	}
	ps.Done()
	if s.ctrl != nil {
		errs = append(errs, s.ctrl.Close())
	}
	errs = append(errs, s.closeTier())
	errs = append(errs, s.dirLock.release()) // last: nothing touches the directory after it
	return errors.Join(errs...)
}

// watchMetadata reconciles at every change. ch is taken before the
// metadata is read, so a change made in between is not missed.
//
// Partitions that could not be opened for lack of file descriptors
// (fd_budget.go) are tried again every second until they open.
func (s *Server) watchMetadata(ch <-chan struct{}) {
	defer s.wg.Done()
	var retry <-chan time.Time
	warned := false // about descriptors, since the last reconcile that worked
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-ch:
			ch = s.ctrl.Changes()
		case <-retry:
		}
		retry = nil
		err := s.reconcile(s.ctrl.Metadata())
		switch {
		case err != nil && plog.IsNoDescriptors(err):
			if !warned {
				s.log.Warn("partitions not opened: no file descriptor left; trying again every second", "err", err)
				warned = true
			}
			retry = time.After(time.Second)
		case err != nil:
			s.log.Error("apply metadata", "err", err)
		case warned:
			s.log.Info("partitions opened once file descriptors were free")
			warned = false
		}
		s.checkTLS() // a dynamic ssl.keystore.* change (listeners.go)
	}
}

// housekeeping runs retention and time-based rolls every
// log.retention.check.interval.ms, and the flush.ms check every
// log.flush.scheduler.interval.ms (at most a second apart, so that flush.ms
// is honoured even with Kafka's default of never).
func (s *Server) housekeeping() {
	defer s.wg.Done()
	retention := time.NewTicker(s.retentionCheckInterval())
	defer retention.Stop()
	leaders := time.NewTicker(leaderCheckInterval)
	defer leaders.Stop()
	flush := time.NewTicker(s.flushCheckInterval())
	defer flush.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-leaders.C:
			s.checkLeaders() // leader_check.go
		case <-flush.C:
			for _, p := range s.allPartitions() {
				if err := p.Log().MaybeFlush(); err != nil {
					s.log.Warn("flush", "topic", p.Topic(), "partition", p.Index(), "err", err)
				}
			}
		case <-retention.C:
			for _, p := range s.allPartitions() {
				if err := p.Log().MaybeRoll(); err != nil {
					s.log.Warn("roll", "topic", p.Topic(), "partition", p.Index(), "err", err)
				}
				if n, err := s.enforceRetention(p); err != nil {
					s.log.Warn("retention", "topic", p.Topic(), "partition", p.Index(), "err", err)
				} else if n > 0 {
					s.log.Info("retention deleted segments", "topic", p.Topic(), "partition", p.Index(), "segments", n)
				}
			}
		}
	}
}

// reconcile opens the partitions the metadata gives this broker, closes
// and deletes those it no longer has, and applies topic configs. It is
// idempotent and serialised by the lock of the partition set
// (replica.Manager.Edit).
func (s *Server) reconcile(md *controller.Metadata) error {
	md = s.newestMetadata(md)
	defer s.syncGroups(md) // after the partition set is unlocked
	defer s.syncTxns(md)
	s.updateDraining(md)
	ps := s.replicas.Edit()
	defer ps.Done()
	// Read again once the set is locked: callers read the metadata before
	// they wait for the lock, and one that waited (Start's, or a
	// LeaderAndIsr's applyNow, racing watchMetadata) must not apply an
	// older view over a newer one. It once made a new leader a follower
	// of no one again right after it began restoring from the bucket,
	// and it served an empty log until the next change.
	md = s.newestMetadata(md)
	want := map[tp]struct{}{}
	var errs []error
	for name, t := range md.Topics {
		if !controller.ValidTopicName(name) {
			// Names a directory: never one that leaves the data directory.
			errs = append(errs, fmt.Errorf("topic %q has an illegal name: not hosted", name))
			continue
		}
		ts := s.resolver(md).Topic(t.Configs)
		lc := ts.Log
		for _, pm := range t.Partitions {
			if !containsID(pm.Replicas, s.cfg.ID) {
				continue
			}
			k := tp{name, pm.Index}
			want[k] = struct{}{}
			if p := ps.Get(k.topic, k.part); p != nil {
				if p.TopicID() == t.ID {
					p.Log().SetConfig(lc)
					s.setTierSettings(p, ts)
					p.SetMinISR(ts.MinInsyncReplicas)
					p.SetLeaderEpoch(pm.LeaderEpoch)
					s.applyRole(p, pm)
					continue
				}
				// Same name, new topic: the old one is gone.
				s.replicas.Unfollow(k.topic, k.part)
				s.forgetRemoteTopic(p, md)
				s.dropTierSettings(p)
				p.Log().Delete()
				ps.Remove(k.topic, k.part)
			}
			p, err := s.openPartition(t, pm, lc)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			p.SetMinISR(ts.MinInsyncReplicas)
			s.setTierSettings(p, ts)
			ps.Put(p)
			s.applyRole(p, pm)
		}
	}
	for _, p := range ps.All() {
		k := tp{p.Topic(), p.Index()}
		if _, ok := want[k]; ok {
			continue
		}
		ps.Remove(k.topic, k.part)
		s.replicas.Unfollow(k.topic, k.part)
		s.forgetRemoteTopic(p, md)
		s.dropTierSettings(p)
		p.ApplyFollower(s.cfg.ID, controller.Partition{Leader: -1})
		if err := p.Log().Delete(); err != nil {
			errs = append(errs, fmt.Errorf("delete %s-%d: %w", k.topic, k.part, err))
		}
		s.log.Debug("deleted partition", "topic", k.topic, "partition", k.part)
	}
	return errors.Join(errs...)
}

// newestMetadata is md, or the controller's metadata when that is newer.
func (s *Server) newestMetadata(md *controller.Metadata) *controller.Metadata {
	if cur := s.ctrl.Metadata(); cur != nil && (md == nil || cur.Version > md.Version) {
		return cur
	}
	return md
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// partitionMetadataFile is Kafka's per-partition file naming the topic id.
const partitionMetadataFile = "partition.metadata"

func topicIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func (s *Server) openPartition(t *controller.Topic, pm controller.Partition, lc plog.Config) (*partition, error) {
	dir := filepath.Join(s.cfg.DataDir, fmt.Sprintf("%s-%d", t.Name, pm.Index))
	idLine := "topic_id: " + topicIDString(t.ID)
	if b, err := os.ReadFile(filepath.Join(dir, partitionMetadataFile)); err == nil && !strings.Contains(string(b), idLine) {
		// A directory left by a deleted topic of the same name.
		s.log.Warn("removing partition directory of an older topic", "dir", filepath.Base(dir))
		if err := s.fs.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("remove stale %s: %w", filepath.Base(dir), err)
		}
	}
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Base(dir), err)
	}
	if _, err := s.fs.Stat(filepath.Join(dir, partitionMetadataFile)); err != nil {
		if err := s.writePartitionMetadata(dir, []byte("version: 0\n"+idLine+"\n")); err != nil {
			return nil, err // the log directory is offline (logdir.go), or the disk full or descriptors out
		}
	}
	l, err := plog.Open(plog.Options{FS: s.fs, Dir: dir, Config: lc, Logger: s.log.With("topic", t.Name, "partition", pm.Index)})
	if err != nil {
		return nil, fmt.Errorf("open %s-%d: %w", t.Name, pm.Index, err)
	}
	s.watchLog(l)
	p := replica.NewPartition(t.Name, pm.Index, t.ID, l)
	p.SetLeaderEpoch(pm.LeaderEpoch)
	p.StoreHW(s.replicas.InitialHW(t.Name, pm.Index, l, len(pm.Replicas)))
	return p, nil
}

// applyRole makes p lead or follow as pm says (LeaderAndIsr semantics).
// Called by reconcile with the partition set locked.
func (s *Server) applyRole(p *partition, pm controller.Partition) {
	if pm.Leader == s.cfg.ID {
		s.replicas.Unfollow(p.Topic(), p.Index())
		s.markRestore(p) // remotelog/restore.go
		p.ApplyLeader(s.cfg.ID, pm, time.Now())
		return
	}
	p.Restoring.Store(false)
	p.ApplyFollower(s.cfg.ID, pm)
	s.replicas.Follow(p, pm.Leader, pm.LeaderEpoch)
}

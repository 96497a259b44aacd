package zk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"strata/controller"
)

// Options configure a Controller. Zero durations take Kafka's defaults.
type Options struct {
	// Connect is the ZooKeeper connect string, HOST:PORT[,HOST:PORT...][/chroot]
	// (Kafka's zookeeper.connect). A missing chroot is created.
	Connect string
	// Broker is this broker: its id, advertised host and port, and rack.
	Broker controller.Broker
	// SessionTimeout is zookeeper.session.timeout.ms (default 18s).
	SessionTimeout time.Duration
	// ConnectionTimeout is zookeeper.connection.timeout.ms: how long New
	// waits for a session (default SessionTimeout).
	ConnectionTimeout time.Duration
	// DefaultPartitions is num.partitions (default 1), used when a
	// CreateTopicRequest asks for -1.
	DefaultPartitions int32
	// DefaultReplicationFactor is default.replication.factor (default 1).
	DefaultReplicationFactor int16
	// UncleanLeaderElection is the broker's unclean.leader.election.enable
	// (default false); topic and dynamic broker configs override it.
	UncleanLeaderElection bool
	// AutoLeaderRebalance is auto.leader.rebalance.enable: the active
	// controller periodically moves leadership back to preferred replicas.
	AutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds
	// (default 300s).
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePerBrokerPercentage is
	// leader.imbalance.per.broker.percentage (Kafka's default is 10).
	LeaderImbalancePerBrokerPercentage int
	// Auth authenticates the session (zookeeper.digest.user and
	// zookeeper.digest.password) and chooses the znodes' ACLs
	// (zookeeper.set.acl).
	Auth Auth
	// Transport carries the active controller's LeaderAndIsr,
	// UpdateMetadata and StopReplica requests to the other brokers; nil
	// means the Kafka protocol to their advertised addresses.
	Transport Transport
	// InterBrokerListener names the listener brokers reach each other on
	// (the endpoint of LeaderAndIsr's live leaders); ControlPlaneListener
	// the one the controller reaches brokers on ("": the inter-broker
	// listener). Empty both: each broker's first endpoint.
	InterBrokerListener, ControlPlaneListener string
	// InterBrokerProtocol is the inter-broker listener's security
	// protocol id (0 PLAINTEXT, 1 SSL, …).
	InterBrokerProtocol int16
	// Dial, if set, opens the controller's connections to brokers (TLS
	// on an SSL control-plane listener); nil: plain TCP.
	Dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	Logger *slog.Logger
}

// controlPlane is the listener the controller reaches brokers on.
func (o *Options) controlPlane() string {
	if o.ControlPlaneListener != "" {
		return o.ControlPlaneListener
	}
	return o.InterBrokerListener
}

func (o *Options) setDefaults() {
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 18 * time.Second
	}
	if o.ConnectionTimeout <= 0 {
		o.ConnectionTimeout = o.SessionTimeout
	}
	if o.DefaultPartitions <= 0 {
		o.DefaultPartitions = 1
	}
	if o.DefaultReplicationFactor <= 0 {
		o.DefaultReplicationFactor = 1
	}
	if o.LeaderImbalanceCheckInterval <= 0 {
		o.LeaderImbalanceCheckInterval = 300 * time.Second
	}
	if o.LeaderImbalancePerBrokerPercentage < 0 {
		o.LeaderImbalancePerBrokerPercentage = 0
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports a configuration that cannot work.
func (o *Options) Validate() error {
	servers, chroot := splitConnect(o.Connect)
	if len(servers) == 0 {
		return fmt.Errorf("zookeeper connect string %q has no servers", o.Connect)
	}
	if chroot != "" && (strings.HasSuffix(chroot, "/") || strings.Contains(chroot, "//")) {
		return fmt.Errorf("zookeeper connect string %q: bad chroot %q", o.Connect, chroot)
	}
	if o.Broker.ID < 0 {
		return fmt.Errorf("broker id %d must not be negative", o.Broker.ID)
	}
	return o.Auth.Validate()
}

// splitConnect splits "h1:p1,h2:p2/chroot" into servers and chroot.
func splitConnect(s string) ([]string, string) {
	hosts, chroot := s, ""
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hosts, chroot = s[:i], s[i:]
	}
	if chroot == "/" {
		chroot = ""
	}
	var servers []string
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			servers = append(servers, h)
		}
	}
	return servers, chroot
}

// Controller is one broker's view of, and vote in, the ZooKeeper-elected
// controller. It implements controller.Controller.
//
// State ownership: the run goroutine owns the znode cache, the session
// bookkeeping and the election; mu guards the published snapshot; active
// is read by mutations from any goroutine. Mutations hold opMu so that one
// runs at a time on this broker.
type Controller struct {
	opts   Options
	log    *slog.Logger
	conn   *zk.Conn
	chroot string
	acls   aclPolicy // the znodes' ACLs (acl.go)

	// aclStore is the authorizer's ACLs (kafka_acls.go), read from
	// /kafka-acl and /kafka-acl-extended once the broker asks for them.
	aclStore controller.ACLSet
	aclOnce  sync.Once

	metrics ctrlMetrics // metrics.go
	// lastRegistered are the brokers of the last view (run goroutine);
	// reassignSteps and reassignDone count reassignment steps and
	// completions since the last summary line (elect.go).
	lastRegistered              map[int32]bool
	reassignSteps, reassignDone atomic.Int64

	kick    chan struct{}  // session state changed; buffered 1
	invalid chan firing    // fired watches
	done    chan struct{}  // closed by Close
	wg      sync.WaitGroup // the run goroutine

	// active is the controller epoch zk version this broker holds as
	// active controller, or -1. Cleared at once on session trouble.
	active atomic.Int64
	epoch  atomic.Int32 // controller epoch while active

	mu      sync.Mutex
	md      *controller.Metadata
	changed chan struct{}
	epochs  map[int32]int64 // broker epochs (czxid) of live brokers
	// pushedPublished is the version of the pushed state the published
	// snapshot was built from; pushedCh is closed when it grows.
	pushedPublished int64
	pushedCh        chan struct{}
	// ready is closed at the first snapshot of the whole cluster: read
	// from ZooKeeper as controller, or pushed by the controller.
	ready     chan struct{}
	readyOnce sync.Once
	// shuttingDown are the brokers in controlled shutdown (by broker
	// epoch), known to the active controller: they lead nothing, join no
	// ISR and are not offered to clients.
	shuttingDown map[int32]int64

	// pushed is what the active controller told this broker (push.go).
	pushed pushed
	// ownEpoch is this broker's epoch: the czxid of its registration.
	ownEpoch atomic.Int64
	// senders push changes to the other brokers while active (send.go).
	senders   *senders
	transport Transport

	opMu sync.Mutex

	// stepErr is the run goroutine's last failure, nil after a success:
	// New names it when registration does not complete.
	stepErr atomic.Pointer[error]

	// Owned by run.
	cache      map[watchKey]*cached
	sessionID  int64
	registered bool
	wasActive  bool
	closeOnce  sync.Once
}

var _ controller.Controller = (*Controller)(nil)

// New connects to ZooKeeper, registers the broker and starts following
// (and competing for) the controller. It returns once the broker is
// registered and a first snapshot is built, or fails after
// ConnectionTimeout (plus SessionTimeout when an earlier session of the
// same broker id still holds its registration).
func New(ctx context.Context, opts Options) (*Controller, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	servers, chroot := splitConnect(opts.Connect)
	c := &Controller{
		opts:    opts,
		log:     opts.Logger.With("component", "zk-controller", "broker_id", opts.Broker.ID),
		chroot:  chroot,
		acls:    newACLPolicy(opts.Auth, chroot),
		kick:    make(chan struct{}, 1),
		invalid: make(chan firing, 256),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		cache:   map[watchKey]*cached{},
		md:      emptyMetadata(),

		pushedCh:     make(chan struct{}),
		ready:        make(chan struct{}),
		shuttingDown: map[int32]int64{},
		pushed:       pushed{topics: map[string]*pushedTopic{}, ctrlID: -1},
		transport:    opts.Transport,
		metrics:      newCtrlMetrics(),
	}
	if c.transport == nil {
		c.transport = newNetTransport(opts.Broker.ID, opts.controlPlane(), opts.Dial)
	}
	c.senders = newSenders(c, c.transport)
	c.active.Store(-1)
	conn, _, err := zk.Connect(servers, opts.SessionTimeout, zk.WithDialer(cappedDialer(opts.SessionTimeout*2/3)),
		zk.WithLogger(zkLogger{c.log}), zk.WithLogInfo(false), zk.WithEventCallback(c.onEvent))
	if err != nil {
		return nil, fmt.Errorf("connect to zookeeper %s: %w", opts.Connect, err)
	}
	c.conn = conn
	if err := c.waitSession(ctx, opts.ConnectionTimeout); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.addAuthWithin(ctx, opts.ConnectionTimeout); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.retryWithin(ctx, opts.ConnectionTimeout, c.ensurePersistentPaths); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.retryWithin(ctx, opts.ConnectionTimeout, c.secureExisting); err != nil {
		conn.Close()
		return nil, err
	}
	c.wg.Add(1)
	go c.run()
	if opts.AutoLeaderRebalance {
		c.wg.Add(1)
		go c.rebalanceLoop()
	}
	regCtx, cancel := context.WithTimeout(ctx, opts.ConnectionTimeout+opts.SessionTimeout)
	defer cancel()
	if err := c.waitFor(regCtx, func(md *controller.Metadata) bool {
		return md.ClusterID != "" && c.ownEpoch.Load() > 0
	}); err != nil {
		c.Close()
		if last := c.stepErr.Load(); last != nil {
			return nil, fmt.Errorf("register broker %d in zookeeper: %w (last failure: %w)", opts.Broker.ID, err, *last)
		}
		return nil, fmt.Errorf("register broker %d in zookeeper: %w", opts.Broker.ID, err)
	}
	return c, nil
}

func emptyMetadata() *controller.Metadata {
	return &controller.Metadata{
		ControllerID:  -1,
		Topics:        map[string]*controller.Topic{},
		TopicIDs:      map[[16]byte]string{},
		BrokerConfigs: map[string]map[string]string{},
	}
}

func (c *Controller) waitSession(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for c.conn.State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("no zookeeper session with %s within %v (zookeeper.connection.timeout.ms)", c.opts.Connect, d)
		case <-tick.C:
		}
	}
	return nil
}

// onEvent runs on the zk client's goroutine for session events; it must
// not block. Losing the session (or the connection, after which the
// session may expire at any moment) ends this broker's term as controller
// at once.
func (c *Controller) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	if ev.State != zk.StateHasSession {
		if c.active.Swap(-1) != -1 {
			c.log.Warn("zookeeper session interrupted; no longer acting as controller", "state", ev.State.String())
		}
		c.publishNoController()
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Ready tells, without waiting, whether WaitReady would return at once.
func (c *Controller) Ready() bool {
	select {
	case <-c.ready:
		return true
	default:
		return false
	}
}

// WaitReady waits until this broker knows the whole cluster: as the active
// controller, or told by it (the first UpdateMetadata). A broker that is
// not the controller is told only once it accepts requests.
func (c *Controller) WaitReady(ctx context.Context) error {
	select {
	case <-c.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return errors.New("controller closed")
	}
}

// kickRun makes the run goroutine rebuild soon.
func (c *Controller) kickRun() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// publishNoController publishes the current snapshot with ControllerID -1.
func (c *Controller) publishNoController() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.md.ControllerID == -1 {
		return
	}
	md := *c.md
	md.ControllerID = -1
	md.Version++
	c.md = &md
	close(c.changed)
	c.changed = make(chan struct{})
}

// Metadata returns the current snapshot.
func (c *Controller) Metadata() *controller.Metadata {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.md
}

// Changes returns a channel closed at the next change.
func (c *Controller) Changes() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// BrokerEpoch returns the broker epoch (the czxid of its registration
// znode) of a live broker, or -1.
func (c *Controller) BrokerEpoch(id int32) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.epochs[id]; ok {
		return e
	}
	return -1
}

// IsActive reports whether this broker is the active controller now.
func (c *Controller) IsActive() bool { return c.active.Load() != -1 }

// ControllerEpoch returns the controller epoch this broker holds as active
// controller, or -1.
func (c *Controller) ControllerEpoch() int32 {
	if !c.IsActive() {
		return -1
	}
	return c.epoch.Load()
}

// Close ends the session: the broker's registration (and /controller, if
// it held it) disappear at once.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.active.Store(-1)
		close(c.done)
		c.conn.Close()
		c.wg.Wait()
		c.senders.close()
		c.transport.Close()
		c.publishNoController()
	})
	return nil
}

// waitFor waits until pred holds for the published snapshot.
func (c *Controller) waitFor(ctx context.Context, pred func(*controller.Metadata) bool) error {
	for {
		c.mu.Lock()
		md, ch := c.md, c.changed
		c.mu.Unlock()
		if pred(md) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return errors.New("controller closed")
		}
	}
}

// p maps a Kafka path below the chroot.
func (c *Controller) p(path string) string { return c.chroot + path }

// addAuthWithin authenticates the session, waiting at most d.
func (c *Controller) addAuthWithin(ctx context.Context, d time.Duration) error {
	if !c.opts.Auth.hasCredentials() {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- c.opts.Auth.addAuth(c.conn) }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return fmt.Errorf("zookeeper digest authentication as %q: no answer within %v (zookeeper.connection.timeout.ms)", c.opts.Auth.DigestUser, d)
	}
}

// retryWithin retries f through passing connection losses for up to d
// (zookeeper.connection.timeout.ms).
func (c *Controller) retryWithin(ctx context.Context, d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) ||
			!(errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrNoServer)) {
			return err
		}
		if err := c.waitSession(ctx, time.Until(deadline)); err != nil {
			return err
		}
	}
}

// cappedDialer dials ZooKeeper with connections whose read deadlines are
// at most max away. go-zookeeper waits ten receive timeouts for the answer
// to its handshake; a server that accepts but does not answer (one that is
// restarting) would hold a broker without a session for that long, past
// its session's expiry. With the cap it gives up after one receive
// timeout and tries again.
func cappedDialer(max time.Duration) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		conn, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return cappedConn{Conn: conn, max: max}, nil
	}
}

type cappedConn struct {
	net.Conn
	max time.Duration
}

func (c cappedConn) SetReadDeadline(t time.Time) error {
	if limit := time.Now().Add(c.max); t.IsZero() || t.After(limit) {
		t = limit
	}
	return c.Conn.SetReadDeadline(t)
}

// ensurePersistentPaths creates the chroot and Kafka's persistent paths.
func (c *Controller) ensurePersistentPaths() error {
	if c.chroot != "" {
		parts := strings.Split(strings.TrimPrefix(c.chroot, "/"), "/")
		for i := range parts {
			if err := c.createIfMissing("/" + strings.Join(parts[:i+1], "/")); err != nil {
				return err
			}
		}
	}
	for _, path := range persistentPaths {
		if err := c.createIfMissing(c.p(path)); err != nil {
			return err
		}
	}
	return nil
}

func (c *Controller) createIfMissing(full string) error {
	_, err := c.conn.Create(full, nil, 0, c.acl(full))
	if errors.Is(err, zk.ErrNoAuth) {
		// ZooKeeper checks the parent's ACL before the name.
		if ok, _, xerr := c.conn.Exists(full); xerr == nil && ok {
			return nil
		}
		return fmt.Errorf("create %s: %w: %s", full, err, c.noAuthHint())
	}
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", full, err)
	}
	return nil
}

type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug("zookeeper client: " + fmt.Sprintf(format, args...))
}

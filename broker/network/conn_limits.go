package network

// Limits on what clients may make the broker hold, with Kafka's configs:
//
//   - max.connections.per.ip (and max.connections.per.ip.overrides) and
//     max.connections, checked as a connection is accepted. Over the
//     per-IP limit the new connection is closed at once, as Kafka does;
//     over max.connections it is closed at once too (Kafka stops accepting
//     until a connection closes, which stalls every client behind the
//     listen backlog). Both are dynamic cluster-wide configs, read at each
//     accept. Kafka never refuses a connection to its inter-broker
//     listener for max.connections (it still counts toward the total, and
//     max.connections.per.ip applies to every listener). Strata tells a
//     peer broker by its address, whatever the listener (peerBroker): a
//     connection from an address of another broker registered in the
//     cluster metadata (its advertised host, resolved) is admitted over
//     max.connections, counted as any other, and still bound by
//     max.connections.per.ip (give broker hosts an override, as with
//     Kafka). An address of this machine is never taken for a peer: on a
//     host shared by several brokers (a local cluster) a client cannot be
//     told from a broker by address, and such connections are limited as
//     before. The rule is decided at accept, before any request: the
//     first request's client id (the replica fetcher's
//     "strata-replica-<id>") would name the peer, but it arrives after
//     the limit must already have been applied, and a client id is
//     whatever the client says; so anything running on another broker's
//     host is exempt too, as anything that reaches Kafka's inter-broker
//     listener is.
//   - queued.max.request.bytes bounds the memory of requests read and not
//     yet handled (conn_memory.go). Kafka counts each request's buffer; a
//     decoded request can take far more than its frame, so Strata counts
//     that too (Options.DecodeCharge, the broker's decodeCharge).
//   - connections.max.idle.ms bounds how long a request may take to arrive
//     and how long a response may make no progress (conn.go): a client that
//     trickles a request, or never reads its responses, loses the
//     connection and everything its response held.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"strata/broker/config"
)

// Limits are the connection limits in force, read at each accept
// (Options.Limits): dynamic cluster-wide configs.
type Limits struct {
	MaxConnections      int64  // max.connections
	MaxConnectionsPerIP int64  // max.connections.per.ip
	PerIPOverrides      string // max.connections.per.ip.overrides
	// PeerHosts returns the advertised hosts of the other brokers
	// registered in the cluster metadata (see peerBroker); called only
	// for a connection over max.connections. nil: no metadata.
	PeerHosts func() []string
}

// connLimits counts open connections, in total and per remote IP.
type connLimits struct {
	mu    sync.Mutex
	total int
	perIP map[string]int

	// The parsed max.connections.per.ip.overrides (IP to limit) for the
	// value ovRaw; host names are resolved when the value changes.
	ovRaw string
	ov    map[string]int64

	// The addresses of the other registered brokers (peerBroker), for
	// the hosts peersKey; resolved when the hosts change, and again
	// after peersRetry when a host did not resolve.
	peersKey   string
	peers      map[string]bool
	peersRetry time.Time // zero: every host resolved
	// local are this machine's interface addresses (never a peer's).
	localOnce sync.Once
	local     map[string]bool

	refused    int // connections refused since the last log line
	refusedLog time.Time
	warned     time.Time // the last warn line

	memOnce sync.Once
	mem     *requestMemory
}

// connIP is the remote IP of a connection in canonical form ("" if it has
// none, which no limit applies to).
func connIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ""
}

// admitConn counts a new connection, or closes it at once when it would
// exceed max.connections.per.ip (or the address's override) or
// max.connections. Every admitted connection is given back with
// releaseConn.
func (s *Server) admitConn(c net.Conn) bool {
	lim := s.opts.Limits()
	maxTotal := lim.MaxConnections
	ip := connIP(c)
	perIP := lim.MaxConnectionsPerIP
	l := &s.limits
	l.mu.Lock()
	if ip != "" {
		if n, ok := l.override(lim.PerIPOverrides, ip); ok {
			perIP = n
		}
	}
	var why string
	switch {
	case ip != "" && int64(l.perIP[ip]) >= perIP:
		why = fmt.Sprintf("%s has %d connections (max.connections.per.ip)", ip, l.perIP[ip])
	case int64(l.total) >= maxTotal && !l.peerBroker(lim.PeerHosts, ip):
		why = fmt.Sprintf("the broker has %d connections (max.connections)", l.total)
	}
	if why == "" {
		l.total++
		if ip != "" {
			if l.perIP == nil {
				l.perIP = map[string]int{}
			}
			l.perIP[ip]++
		}
		l.mu.Unlock()
		return true
	}
	l.refused++
	logNow := time.Since(l.refusedLog) >= 10*time.Second
	refused := l.refused
	if logNow {
		l.refusedLog, l.refused = time.Now(), 0
	}
	l.mu.Unlock()
	c.Close()
	s.log.Debug("refused connection", "remote", c.RemoteAddr().String(), "reason", why)
	if logNow {
		s.log.Info("refusing connections over the limits", "refused", refused, "last", why)
	}
	return false
}

// warn logs at warning level at most once every 10 seconds: what hostile
// clients cause must not flood the log.
func (l *connLimits) warn(log *slog.Logger, msg string, args ...any) {
	l.mu.Lock()
	now := time.Since(l.warned) >= 10*time.Second
	if now {
		l.warned = time.Now()
	}
	l.mu.Unlock()
	if now {
		log.Warn(msg, args...)
	}
}

// releaseConn gives back a connection counted by admitConn.
func (s *Server) releaseConn(c net.Conn) {
	ip := connIP(c)
	l := &s.limits
	l.mu.Lock()
	l.total--
	if n, ok := l.perIP[ip]; ok {
		if n <= 1 {
			delete(l.perIP, ip)
		} else {
			l.perIP[ip] = n - 1
		}
	}
	l.mu.Unlock()
}

// override returns the max.connections.per.ip override for ip, parsing raw
// (and resolving its host names) when it changed. Called with l.mu held.
func (l *connLimits) override(raw, ip string) (int64, bool) {
	if raw == "" {
		return 0, false
	}
	if raw != l.ovRaw || l.ov == nil {
		l.ovRaw, l.ov = raw, map[string]int64{}
		hosts, _ := config.ParseConnectionOverrides(raw) // validated when set
		for host, n := range hosts {
			if a := net.ParseIP(host); a != nil {
				l.ov[a.String()] = int64(n)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			addrs, _ := net.DefaultResolver.LookupHost(ctx, host)
			cancel()
			for _, a := range addrs {
				if p := net.ParseIP(a); p != nil {
					l.ov[p.String()] = int64(n)
				}
			}
		}
	}
	n, ok := l.ov[ip]
	return n, ok
}

// peerBroker tells whether ip is an address of another broker registered
// in the cluster metadata (peerHosts) and not an address of this machine
// (see the file comment). Broker host names are resolved when the set of
// hosts changes. Called with l.mu held, only for a connection over
// max.connections.
func (l *connLimits) peerBroker(peerHosts func() []string, ip string) bool {
	if ip == "" || peerHosts == nil {
		return false
	}
	l.localOnce.Do(func() {
		l.local = map[string]bool{}
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				l.local[n.IP.String()] = true
			}
		}
	})
	if l.local[ip] {
		return false
	}
	hosts := slices.Clone(peerHosts())
	slices.Sort(hosts)
	key := strings.Join(hosts, ",")
	if key != l.peersKey || l.peers == nil || !l.peersRetry.IsZero() && time.Now().After(l.peersRetry) {
		l.peersKey, l.peers, l.peersRetry = key, map[string]bool{}, time.Time{}
		for _, h := range hosts {
			if a := net.ParseIP(h); a != nil {
				l.peers[a.String()] = true
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			addrs, err := net.DefaultResolver.LookupHost(ctx, h)
			cancel()
			if err != nil {
				l.peersRetry = time.Now().Add(10 * time.Second)
			}
			for _, a := range addrs {
				if p := net.ParseIP(a); p != nil {
					l.peers[p.String()] = true
				}
			}
		}
	}
	return l.peers[ip]
}

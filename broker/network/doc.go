// Package network is the broker's network layer, as Kafka's SocketServer:
// it accepts connections on each listener (one accept loop each; a
// connection knows its listener, security protocol and principal,
// listener.go), runs the TLS handshake of SSL listeners with certificates
// reloaded as they change (tls.go), authenticates the connections of
// SASL_PLAINTEXT and SASL_SSL listeners with SaslHandshake and
// SaslAuthenticate, serving nothing but those and ApiVersions before
// (PLAIN and SCRAM, sasl.go and scram.go; OAUTHBEARER against a JWKS,
// oauth.go; KIP-368 session expiry), within max.connections and
// max.connections.per.ip (conn_limits.go), reads size-prefixed request
// frames, reserving their memory from queued.max.request.bytes
// (conn_memory.go), enforces connections.max.idle.ms on reads and writes,
// mutes a connection while its responses wait (one request handled at a
// time, delayed responses written in order by a writer goroutine,
// conn.go), and writes responses, splicing fetch records in with writev
// or sendfile (sendfile.go).
//
// It knows no Kafka API beyond the request header and SASL's (with
// ApiVersions, its authentication gate): it parses the header's
// API key, version, correlation id and client id and hands the rest of the
// frame to a Handler (the broker), which decodes and handles the request
// and returns a Response that this package encodes and writes. What it
// needs of the broker comes through Options: the per-API decode-cost
// estimate (DecodeCharge), the dynamic connection limits and the peer
// brokers' hosts (Limits), and the connection-count hooks.
//
// It may import strata/broker/plog, strata/broker/config,
// strata/internal/*, franz-go's kmsg, kbin and kerr, golang.org/x/sys/unix
// (sendfile, TCP_CORK) and the standard library (net/http for the JWKS).
// It must not import strata/broker, strata/broker/replica,
// strata/broker/remotelog, strata/broker/group, strata/controller,
// strata/tier or strata/index; internal/archtest checks this.
package network

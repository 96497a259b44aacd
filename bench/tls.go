package bench

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TLS targets: a Strata broker and one Apache Kafka node, each serving
// only an SSL listener with a certificate made for the run, signed by a
// CA made for the run; both get the same certificate and CA. The
// harness's clients (producers, consumers, the read-backs, the raw
// reader) dial TLS trusting that CA. Kafka is held to the cipher suite Go
// picks on this machine, TLS 1.3's TLS_AES_128_GCM_SHA256 (a JVM server
// prefers TLS_AES_256_GCM_SHA384), so that both brokers do the same
// cryptography; each result says what its connections negotiated.
const (
	TargetStrataTLS = "strata-tls"
	TargetKafkaTLS  = "kafka-tls"
)

// tlsTarget reports whether target serves TLS.
func tlsTarget(target string) bool { return target == TargetStrataTLS || target == TargetKafkaTLS }

// kafkaTLSCipher is the one cipher suite the kafka-tls node offers.
const kafkaTLSCipher = "TLS_AES_128_GCM_SHA256"

// brokers is how the harness's clients reach a target: its bootstrap
// addresses and, when it serves TLS, the clients' TLS config.
type brokers struct {
	seeds []string
	tls   *tls.Config // nil: plaintext
	caPEM []byte      // the CA tls trusts, for helper processes
}

// plaintext is brokers at seeds without TLS.
func plaintext(seeds ...string) brokers { return brokers{seeds: seeds} }

// overTLS is brokers at seeds serving TLS with certificates of the CA in
// caPEM; empty caPEM means plaintext.
func overTLS(seeds []string, caPEM []byte) (brokers, error) {
	b := plaintext(seeds...)
	if len(caPEM) == 0 {
		return b, nil
	}
	cfg, err := clientTLS(caPEM)
	if err != nil {
		return b, err
	}
	b.tls, b.caPEM = cfg, caPEM
	return b, nil
}

// opts are the franz-go options that reach the brokers, then more.
func (b brokers) opts(more ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(b.seeds...)}
	if b.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(b.tls.Clone()))
	}
	return append(opts, more...)
}

// client is a franz-go client of the brokers with more options.
func (b brokers) client(more ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(b.opts(more...)...)
}

// dial connects to addr, one of the brokers, with TLS when they serve
// it; the handshake is done when it returns.
func (b brokers) dial(ctx context.Context, addr string) (net.Conn, error) {
	if b.tls == nil {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	d := tls.Dialer{Config: b.tls.Clone()}
	return d.DialContext(ctx, "tcp", addr)
}

// negotiated dials the first seed and names the TLS version and cipher
// suite the connection got ("" without TLS).
func (b brokers) negotiated(ctx context.Context) (string, error) {
	if b.tls == nil || len(b.seeds) == 0 {
		return "", nil
	}
	c, err := b.dial(ctx, b.seeds[0])
	if err != nil {
		return "", fmt.Errorf("TLS handshake with %s: %w", b.seeds[0], err)
	}
	defer c.Close()
	st := c.(*tls.Conn).ConnectionState()
	return tls.VersionName(st.Version) + " " + tls.CipherSuiteName(st.CipherSuite), nil
}

// tlsCerts are the certificates of one run, as PEM files in dir: ca.pem
// (the CA) and broker.pem (the broker's key, then its certificate and the
// CA's: the keystore).
type tlsCerts struct {
	dir        string
	caPEM      []byte
	certPEM    []byte // the broker's certificate, then the CA's
	keyPEM     []byte // PKCS#8
	keystore   string // dir/broker.pem
	truststore string // dir/ca.pem
}

// newTLSCerts makes a CA and a broker certificate for 127.0.0.1, ::1 and
// localhost (ECDSA P-256, valid for a day) in a fresh directory.
func newTLSCerts() (*tlsCerts, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "strata-bench-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("broker certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	c := &tlsCerts{
		caPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		keyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}
	c.certPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), c.caPEM...)
	if c.dir, err = os.MkdirTemp("", "strata-bench-tls-"); err != nil {
		return nil, err
	}
	c.keystore, c.truststore = filepath.Join(c.dir, "broker.pem"), filepath.Join(c.dir, "ca.pem")
	for file, b := range map[string][]byte{c.keystore: append(append([]byte{}, c.keyPEM...), c.certPEM...), c.truststore: c.caPEM} {
		if err := os.WriteFile(file, b, 0o600); err != nil {
			os.RemoveAll(c.dir)
			return nil, err
		}
	}
	return c, nil
}

// Close removes the files.
func (c *tlsCerts) Close() error { return os.RemoveAll(c.dir) }

// clientTLS is the clients' TLS config: it trusts the run's CA only.
func clientTLS(caPEM []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no CA certificate in %d bytes of PEM", len(caPEM))
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// strataArgs configure `strata serve` with one SSL listener on a free
// loopback port (its address is the ready line's) and the run's
// certificates, with Kafka's config names.
func (c *tlsCerts) strataArgs() []string {
	return []string{
		"--set", "listeners=SSL://127.0.0.1:0",
		"--set", "ssl.keystore.type=PEM", "--set", "ssl.keystore.location=" + c.keystore,
		"--set", "ssl.truststore.type=PEM", "--set", "ssl.truststore.location=" + c.truststore,
	}
}

// kafkaProperties are the ssl.* lines of a kafka-tls node's
// server.properties: the same key and certificates, inline (Kafka asks a
// PEM keystore file for a key password; an inline key may go without).
func (c *tlsCerts) kafkaProperties() string {
	inline := func(b []byte) string { return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", `\n`) }
	var b strings.Builder
	b.WriteString("ssl.keystore.type=PEM\n")
	fmt.Fprintf(&b, "ssl.keystore.certificate.chain=%s\n", inline(c.certPEM))
	fmt.Fprintf(&b, "ssl.keystore.key=%s\n", inline(c.keyPEM))
	b.WriteString("ssl.truststore.type=PEM\n")
	fmt.Fprintf(&b, "ssl.truststore.certificates=%s\n", inline(c.caPEM))
	fmt.Fprintf(&b, "ssl.enabled.protocols=TLSv1.3\nssl.cipher.suites=%s\n", kafkaTLSCipher)
	return b.String()
}

// The floor of TLS: AES-128-GCM, the cipher of TLS 1.3's
// TLS_AES_128_GCM_SHA256 that both TLS targets use, sealing and opening
// full TLS records (16 KiB of plaintext) with Go's crypto/aes on one
// core of this machine, in the harness's process before the targets
// start. A broker encrypts every byte it serves and decrypts every byte
// it is sent, so 1000/MB/s is the least CPU seconds per GB TLS can add.

// CipherFloor is the AES-128-GCM throughput of one core: MB per CPU
// second of one thread.
type CipherFloor struct {
	Cipher       string  `json:"cipher"`
	RecordBytes  int     `json:"record_bytes"`
	SealMBPerSec float64 `json:"seal_mb_per_s"` // 10^6 bytes of plaintext sealed per second
	OpenMBPerSec float64 `json:"open_mb_per_s"` // and opened
}

// tlsRecordBytes is TLS's largest record plaintext.
const tlsRecordBytes = 16 << 10

// measureCipherFloor seals, then opens, tlsRecordBytes records for d of
// CPU time each on one goroutine locked to its thread, and divides by the
// thread's CPU time, not the time that passed: on a busy machine the
// thread waits for a CPU, and that is not the cipher's cost.
func measureCipherFloor(d time.Duration) (CipherFloor, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f := CipherFloor{Cipher: "AES-128-GCM", RecordBytes: tlsRecordBytes}
	key := make([]byte, 16)
	nonce := make([]byte, 12)
	_, _ = rand.Read(key)
	block, err := aes.NewCipher(key)
	if err != nil {
		return f, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return f, err
	}
	plain := make([]byte, tlsRecordBytes)
	_, _ = rand.Read(plain)
	sealed := gcm.Seal(nil, nonce, plain, nil)
	dst := make([]byte, 0, len(sealed))
	rate := func(op func() error) (float64, error) {
		var n int64
		start, err := threadCPU()
		if err != nil {
			return 0, err
		}
		for {
			for range 64 {
				if err := op(); err != nil {
					return 0, err
				}
			}
			n += 64
			now, err := threadCPU()
			if err != nil {
				return 0, err
			}
			if el := now - start; el >= d {
				return float64(n*tlsRecordBytes) / el.Seconds() / 1e6, nil
			}
		}
	}
	if f.SealMBPerSec, err = rate(func() error { dst = gcm.Seal(dst[:0], nonce, plain, nil); return nil }); err != nil {
		return f, err
	}
	f.OpenMBPerSec, err = rate(func() error {
		var err error
		dst, err = gcm.Open(dst[:0], nonce, sealed, nil)
		return err
	})
	return f, err
}

// threadCPU is the CPU time the calling thread has used
// (getrusage(RUSAGE_THREAD), Linux).
func threadCPU() (time.Duration, error) {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// cipherFloorDuration is how much CPU time each of seal and open is
// measured for.
const cipherFloorDuration = time.Second

// tlsSummary says what TLS cost Strata in a report with strata-tls and
// strata results, beside the cipher's floor and kafka-tls.
func (r *Report) tlsSummary() string {
	st, ok := r.Result(TargetStrataTLS)
	if !ok || st.Error != "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nTLS in this run")
	if st.TLS != "" {
		fmt.Fprintf(&b, " (%s negotiated %s", TargetStrataTLS, st.TLS)
		if k, ok := r.Result(TargetKafkaTLS); ok && k.TLS != "" {
			fmt.Fprintf(&b, ", %s %s", TargetKafkaTLS, k.TLS)
		}
		b.WriteString(")")
	}
	b.WriteString(":")
	if f := r.CipherFloor; f != nil && f.SealMBPerSec > 0 {
		fmt.Fprintf(&b, " the floor, Go's %s on one core of this machine, seals %.0f MB/s and opens %.0f MB/s of %d-byte records: "+
			"at least %.2f CPU s per GB served and %.2f per GB produced that TLS adds to any broker.",
			f.Cipher, f.SealMBPerSec, f.OpenMBPerSec, f.RecordBytes, 1000/f.SealMBPerSec, 1000/f.OpenMBPerSec)
	}
	if pl, ok := r.Result(TargetStrata); ok && pl.Error == "" {
		var parts []string
		ratio := func(name string, m func(Result) (float64, bool)) {
			a, ok1 := m(st)
			p, ok2 := m(pl)
			if ok1 && ok2 && p > 0 {
				parts = append(parts, fmt.Sprintf("%s %.2fx", name, a/p))
			}
		}
		ratio("produce MB/s", produceMBps)
		ratio("raw read-back records/s", rawRecordsPerSec)
		ratio("franz-go read-back MB/s", consumeMBps)
		ratio("p99 produce latency", produceP99)
		ratio("CPU s per GB produced", cpuPerGBProduced)
		ratio("CPU s per GB served", cpuPerGBServed)
		if len(parts) > 0 {
			fmt.Fprintf(&b, " Strata over TLS against its own plaintext run (%s/%s): %s.", TargetStrataTLS, TargetStrata, strings.Join(parts, ", "))
		}
		a, ok1 := cpuPerGBServed(st)
		p, ok2 := cpuPerGBServed(pl)
		if f := r.CipherFloor; ok1 && ok2 && f != nil && f.SealMBPerSec > 0 {
			fmt.Fprintf(&b, " TLS added %.2f CPU s per GB served, %.1fx the floor's %.2f.", a-p, (a-p)/(1000/f.SealMBPerSec), 1000/f.SealMBPerSec)
		}
	}
	b.WriteString("\n")
	return b.String()
}

package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"strata/broker"
	"strata/broker/config"
	"strata/controller"
	zkctl "strata/controller/zk"
	tierpkg "strata/tier"
)

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// runServe parses `strata serve` flags into the broker configuration (Kafka
// server.properties keys) and runs the broker until SIGTERM or SIGINT.
// Precedence, each later layer winning: the --config file, the STRATA_
// environment variables (config.FromEnv), the dedicated flags given, the
// --set items; then the dedicated flags' defaults fill what none set.
func runServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var (
		brokerID   = fs.Int("broker-id", 0, "broker id (broker.id)")
		listen     = fs.String("listen", "127.0.0.1:9092", "HOST:PORT to accept clients on (port 0 picks a free one)")
		advertise  = fs.String("advertise", "", "HOST:PORT given to clients (default: the listen address; for 0.0.0.0 or ::, the host name if it resolves, else an interface address)")
		dataDir    = fs.String("data-dir", "./strata-data", "data directory (log.dirs)")
		zk         = fs.String("zookeeper", "", "ZooKeeper HOST:PORT[,…][/chroot] (absent: embedded single-node controller)")
		tier       = fs.String("tier", "", "tier URL: file:///abs/dir or s3://bucket/prefix")
		s3         = addS3Flags(fs)
		metrics    = fs.String("metrics", "", "HOST:PORT to serve /metrics, /healthz and /readyz on (absent: none)")
		pprofOn    = fs.Bool("pprof", false, "also serve Go's profiler, /debug/pprof/, on the --metrics address")
		configFile = fs.String("config", "", "server.properties file (Kafka keys); STRATA_ environment variables override it (STRATA_LOG_RETENTION_MS sets log.retention.ms), flags override both")
		logLevel   = fs.String("log-level", "info", "log level: debug, info, warn, error")
		logFormat  = fs.String("log-format", "text", "log format on stderr: text (key=value) or json (one object a line)")
		sets       stringList
	)
	fs.Var(&sets, "set", "key=value broker config (repeatable; Kafka keys)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", fs.Arg(0))
	}
	if *pprofOn && *metrics == "" {
		return fail("--pprof needs --metrics HOST:PORT to serve on")
	}
	logger, err := newLogger(*logLevel, *logFormat)
	if err != nil {
		return fail("%v", err)
	}

	props := map[string]string{}
	if *configFile != "" {
		p, err := config.ReadPropertiesFile(*configFile)
		if err != nil {
			return fail("--config: %v", err)
		}
		props = p
	}
	var flagNames []string
	fs.VisitAll(func(f *flag.Flag) { flagNames = append(flagNames, f.Name) })
	env, err := config.FromEnv(os.Environ(), flagNames)
	if err != nil {
		return fail("%v", err)
	}
	config.MergeEnv(props, env)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["broker-id"] {
		delete(props, "node.id")
		props["broker.id"] = strconv.Itoa(*brokerID)
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return fail("--listen %q: want HOST:PORT", *listen)
	}
	if set["listen"] {
		props["listeners"] = config.ListenerFor(*listen)
	}
	if *advertise != "" {
		if _, _, err := net.SplitHostPort(*advertise); err != nil {
			return fail("--advertise %q: want HOST:PORT", *advertise)
		}
		props["advertised.listeners"] = config.ListenerFor(*advertise)
	}
	if set["data-dir"] {
		delete(props, "log.dir")
		props["log.dirs"] = *dataDir
	}
	if *zk != "" {
		props["zookeeper.connect"] = *zk
	}
	tierCfg := s3.config(*tier)
	if err := tierCfg.Validate(); err != nil {
		return fail("%v", err)
	}
	if *tier != "" && props["remote.log.storage.system.enable"] == "" {
		// --tier turns tiered storage on unless the config says otherwise.
		props["remote.log.storage.system.enable"] = "true"
	}
	if err := config.ApplySets(props, sets); err != nil {
		return fail("--set: %v", err)
	}
	// The defaults of the dedicated flags, where no layer set the config.
	if props["broker.id"] == "" && props["node.id"] == "" {
		props["broker.id"] = strconv.Itoa(*brokerID)
	}
	if props["listeners"] == "" {
		props["listeners"] = config.ListenerFor(*listen)
	}
	if props["log.dirs"] == "" && props["log.dir"] == "" {
		props["log.dirs"] = *dataDir
	}
	cfg, err := config.Load(props)
	if err != nil {
		return fail("%v", err)
	}
	// The listeners come from the config (--listen and --advertise set
	// its first, PLAINTEXT, listener).
	opts := broker.Options{Config: cfg, Logger: logger}
	var srv *broker.Server
	if *tier != "" {
		if c := cfg.RemoteLogManagerCopyMaxBytesPerSecond; c < 1<<20 {
			// Uploads paced below the S3 store's assumed minimum
			// throughput must not time out.
			tierCfg.S3.MinThroughput = max(c/2, 1)
		}
		store, err := tierpkg.Open(tierCfg)
		if err != nil {
			return fail("--tier: %v", err)
		}
		opts.TierStore = store
	}
	if cfg.ZooKeeperConnect != "" {
		opts.NewController = func(self controller.Broker) (controller.Controller, error) {
			controlPlane, interBroker, interBrokerProtocol, dial := srv.ControlPlaneDialer()
			c, err := zkctl.New(context.Background(), zkctl.Options{
				InterBrokerListener:                interBroker,
				InterBrokerProtocol:                interBrokerProtocol,
				ControlPlaneListener:               controlPlane,
				Dial:                               dial,
				Connect:                            cfg.ZooKeeperConnect,
				Broker:                             self,
				SessionTimeout:                     time.Duration(cfg.ZooKeeperSessionTimeoutMs) * time.Millisecond,
				ConnectionTimeout:                  time.Duration(cfg.ZooKeeperConnectionTimeoutMs) * time.Millisecond,
				DefaultPartitions:                  cfg.NumPartitions,
				DefaultReplicationFactor:           cfg.DefaultReplicationFactor,
				UncleanLeaderElection:              cfg.UncleanLeaderElectionEnable,
				AutoLeaderRebalance:                cfg.AutoLeaderRebalanceEnable,
				LeaderImbalanceCheckInterval:       time.Duration(cfg.LeaderImbalanceCheckIntervalSeconds) * time.Second,
				LeaderImbalancePerBrokerPercentage: cfg.LeaderImbalancePerBrokerPercentage,
				Auth:                               zkAuth(cfg),
				Logger:                             logger,
			})
			if err != nil {
				return nil, fmt.Errorf("--zookeeper: %w", err)
			}
			return c, nil
		}
	}
	srv, err = broker.New(opts)
	if err != nil {
		return fail("%v", err)
	}
	// The metrics port is bound before the broker starts, so that a taken
	// port fails fast; it serves once the broker is ready.
	var metricsLn net.Listener
	if *metrics != "" {
		if metricsLn, err = net.Listen("tcp", *metrics); err != nil {
			srv.Close()
			return fail("--metrics: %v", err)
		}
	}
	// The first lines, once the configuration is known to be valid and
	// the metrics port bound: a bad one gets its one-line reason alone on
	// stderr.
	logger.Info("strata", buildVersion()...)
	if len(cfg.Ignored) > 0 {
		logger.Info("ignoring Kafka settings that do not apply", "keys", strings.Join(cfg.Ignored, ","))
	}
	if err := srv.Start(); err != nil {
		return fail("%v", err)
	}
	// The ready line starts "ready broker_id=N listen=HOST:PORT" (scripts
	// and tests parse that); fields after it may be added.
	ready := fmt.Sprintf("ready broker_id=%d listen=%s advertise=%s", cfg.ID, srv.Addr(), srv.AdvertisedAddr())
	attrs := []any{"broker_id", cfg.ID, "listen", srv.Addr().String(), "advertise", srv.AdvertisedAddr()}
	if metricsLn != nil {
		go serveMetrics(metricsLn, srv, *pprofOn)
		logger.Info("metrics", "listen", metricsLn.Addr().String(), "pprof", *pprofOn)
		ready += " metrics=" + metricsLn.Addr().String()
		attrs = append(attrs, "metrics", metricsLn.Addr().String())
	}
	// SIGTERM is handled from before the ready line on: a supervisor that
	// stops the broker as soon as it is ready gets a clean stop.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println(ready)
	logger.Info("ready", append(attrs, "data_dir", cfg.DataDir)...)

	s := <-sig
	logger.Info("stopping", "signal", s.String())
	if err := srv.Close(); err != nil {
		logger.Error("stop", "err", err)
		return 1
	}
	logger.Info("stopped")
	return 0
}

// serveMetrics serves /metrics, /healthz (200 "ok", or 503 while a log
// directory is offline) and /readyz (200 "ready", or 503 and the reason
// until the broker is registered, knows the cluster and has loaded its
// logs) on ln, and Go's profiler under
// /debug/pprof/ when pprofOn (--pprof): profiles show the broker's
// internals and cost CPU, so they are served only when asked for.
func serveMetrics(ln net.Listener, srv *broker.Server, pprofOn bool) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(srv.Registry(), promhttp.HandlerOpts{}))
	mux.Handle("/healthz", srv.HealthHandler()) // 503 naming offline log directories
	mux.Handle("/readyz", srv.ReadyHandler())   // 503 with the reason until registered, with metadata and logs loaded
	if pprofOn {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	hs.Serve(ln)
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "strata: "+format+"\n", args...)
	return 1
}

// zkAuth is the brokers' ZooKeeper credentials and ACL choice.
func zkAuth(cfg *config.Broker) zkctl.Auth {
	return zkctl.Auth{DigestUser: cfg.ZooKeeperDigestUser, DigestPassword: cfg.ZooKeeperDigestPassword, SetACL: cfg.ZooKeeperSetACL}
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"
)

// Run runs the workload against each target in turn. The report holds a
// result for every target; the error joins the targets' failures.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bench config: %w", err)
	}
	rep := &Report{Workload: cfg.Workload, Targets: cfg.Targets, Started: time.Now().UTC(), LoadAvg: readLoadAvg()}
	if slices.ContainsFunc(cfg.Targets, tlsTarget) {
		// The TLS targets share the run's certificates; the cipher's
		// floor is measured before any target starts.
		certs, err := newTLSCerts()
		if err != nil {
			return rep, fmt.Errorf("TLS certificates: %w", err)
		}
		defer certs.Close()
		cfg.certs = certs
		f, err := measureCipherFloor(cipherFloorDuration)
		if err != nil {
			return rep, fmt.Errorf("cipher floor: %w", err)
		}
		rep.CipherFloor = &f
	}
	var errs []error
	for _, t := range cfg.Targets {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		cfg.Logger.Info("bench target", "workload", cfg.Name, "target", t)
		res := runTarget(ctx, cfg, t)
		if res.Error != "" {
			errs = append(errs, fmt.Errorf("%s on %s: %s", cfg.Name, t, res.Error))
		}
		rep.Results = append(rep.Results, res)
		runtime.GC() // free the last target's garbage (kfake keeps records in memory) before the next
	}
	return rep, errors.Join(errs...)
}

// targetRun is the state of one workload against one target.
type targetRun struct {
	cfg  Config
	name string
	tg   target
	res  *Result
	br   brokers
	mon  *monitor

	prodAll  counters // every acknowledged record
	consAll  counters // every distinct record the run's consumers read
	prodHist *latencyHist
	e2eHist  *latencyHist
}

// runTarget starts (or connects to) one target, runs the phases and stops
// it. Errors end up in the result.
func runTarget(ctx context.Context, cfg Config, name string) (res Result) {
	began := time.Now()
	res.Target = name
	defer func() { res.ElapsedSeconds = time.Since(began).Seconds() }()
	if name == TargetMove {
		if err := runMove(ctx, cfg, &res); err != nil {
			res.Error = err.Error()
		}
		return res
	}
	if name == TargetTier {
		if err := runTier(ctx, cfg, &res); err != nil {
			res.Error = err.Error()
		}
		return res
	}
	tg, err := startTarget(ctx, cfg, name)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	br := plaintext(tg.Seeds()...)
	if tlsTarget(name) {
		if br, err = overTLS(tg.Seeds(), cfg.certs.caPEM); err == nil {
			res.TLS, err = br.negotiated(ctx)
		}
		if err != nil {
			res.Error = err.Error()
			_ = tg.Close()
			return res
		}
	}
	tr := &targetRun{cfg: cfg, name: name, res: &res, tg: tg, br: br, prodHist: newLatencyHist(), e2eHist: newLatencyHist()}
	tr.mon = newMonitor(cfg, tg, fmt.Sprintf("[%s %s]", name, cfg.Name), &tr.prodAll, tr.prodHist)
	err = tr.phases(ctx)
	res.Timeline, res.Broker = tr.mon.finish()
	for _, p := range res.Timeline {
		res.MaxLagRecords = max(res.MaxLagRecords, p.LagRecords)
	}
	if cerr := tg.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("stop: %w", cerr))
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

// phases runs setup, backlog, run, drain and read-back, filling res.
func (tr *targetRun) phases(ctx context.Context) (err error) {
	cfg, res := tr.cfg, tr.res
	stamp := time.Now().UnixNano()
	for i := range cfg.Topics {
		res.Topics = append(res.Topics, fmt.Sprintf("strata-bench-%s-%d-%d", cfg.Name, stamp, i))
	}
	setupCtx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer cancel()
	res.ReplicationFactor = cfg.ReplicationFactor
	if singleBroker(tr.name) {
		res.ReplicationFactor = 1
	}
	for _, topic := range res.Topics {
		if err := createTopic(setupCtx, tr.br, topic, cfg.Partitions, res.ReplicationFactor); err != nil {
			return err
		}
	}
	if !harnessOwned(tr.name) { // those are thrown away whole
		defer func() {
			c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			for _, topic := range res.Topics {
				deleteTopic(c, tr.br, topic)
			}
			cancel()
		}()
	}
	ps, err := newProducers(setupCtx, cfg, tr.br, res.Topics, tr.prodHist, &tr.prodAll)
	if err != nil {
		return err
	}
	defer ps.close()
	defer func() {
		res.Sent, res.Acked, res.ProduceErrors = ps.sent.Load(), tr.prodAll.records.Load(), tr.prodAll.errors.Load()
		if ps.txns != nil {
			ps.txns.mu.Lock()
			res.Transactions, res.TxnMarkers = ps.txns.commits, ps.txns.markers
			ps.txns.mu.Unlock()
		}
		res.ProduceLatency = tr.prodHist.summary()
		res.EndToEnd = tr.e2eHist.summary()
		if perr := ps.err(); perr != nil {
			err = errors.Join(err, fmt.Errorf("%d of %d records failed, first: %w", res.ProduceErrors, res.Sent, perr))
		}
	}()
	res.WarmupRecords = int64(len(ps.clients))

	// Backlog: produced before any consumer starts.
	var backlogEnd map[tp]int64
	if cfg.Backlog > 0 {
		tr.mon.setPhase(phaseBacklog, &tr.consAll, 0) // nothing consumes yet: the lag is the backlog
		bctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
		err := ps.backlog(bctx, cfg.Backlog)
		if err == nil {
			backlogEnd, err = endOffsets(bctx, tr.br, res.Topics)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("backlog: %w", err)
		}
		res.Backlog = cfg.Backlog
	}

	// Run: consumers from offset 0 alongside open-loop producers.
	track := newTracker(&tr.consAll)
	var cs *consumers
	start := time.Now()
	win := window{start: start.Add(cfg.Warmup.D())}
	if cfg.Consumers > 0 {
		cs, err = startConsumers(ctx, cfg, tr.br, res.Topics, track, win, tr.e2eHist)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := cs.stop(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}()
		if backlogEnd != nil {
			track.setTarget(backlogEnd)
		}
		tr.mon.setPhase(phaseRun, &tr.consAll, 0)
	} else {
		tr.mon.setPhase(phaseRun, nil, 0)
	}
	end := win.start.Add(cfg.Duration.D())
	var rbDone chan struct{}
	var rbs []Rebalance
	var rbErr error
	gctx, gcancel := context.WithDeadline(ctx, end)
	defer gcancel()
	if cs != nil && cfg.Rebalances > 0 {
		ps.stopEarly, rbDone = make(chan struct{}), make(chan struct{})
		parts := make([]tp, 0, len(res.Topics)*int(cfg.Partitions))
		for _, topic := range res.Topics {
			for p := range cfg.Partitions {
				parts = append(parts, tp{topic, p})
			}
		}
		go func() {
			defer close(rbDone)
			defer close(ps.stopEarly)
			if sleepCtx(gctx, cfg.Warmup.D()) {
				rbs, rbErr = tr.rebalances(gctx, cs, track, parts)
			}
		}()
	}
	var fDone chan struct{}
	var fErr error
	if len(cfg.Faults) > 0 {
		c, ok := tr.tg.(*clusterTarget)
		if !ok {
			return errors.New("faults need the cluster target")
		}
		ps.acks = newAckLog()
		ps.stopEarly, fDone = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(fDone)
			defer close(ps.stopEarly)
			if sleepCtx(gctx, cfg.Warmup.D()) {
				res.Failover, fErr = tr.faults(gctx, c, ps.acks)
			}
		}()
	}
	rctx, cancel := context.WithDeadline(ctx, end.Add(cfg.PhaseTimeout))
	runFrom := tr.prodAll.bytes.Load()
	err = ps.run(rctx, start, end, win)
	res.RunBytes = tr.prodAll.bytes.Load() - runFrom
	cancel()
	if rbDone != nil {
		gcancel()
		<-rbDone
		err = errors.Join(err, rbErr)
	}
	if fDone != nil {
		gcancel()
		<-fDone
		err = errors.Join(err, fErr)
		if f := res.Failover; fErr == nil && (f == nil || len(f.Faults) != len(cfg.Faults)) {
			err = errors.Join(err, fmt.Errorf("run ended (duration %s) before every fault was measured", cfg.Duration))
		}
	}
	runEnd := time.Now()
	res.MeasureStartS = win.start.Sub(tr.mon.origin).Seconds()
	res.MeasureEndS = runEnd.Sub(tr.mon.origin).Seconds()
	if last := ps.lastAck.Load(); last > 0 {
		res.Produce = throughput(ps.measured.records.Load(), ps.measured.bytes.Load(), time.Unix(0, last).Sub(win.start))
	}
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if backlogEnd != nil {
		res.CatchUpSeconds = -1
		if at := track.reachedTime(); !at.IsZero() {
			res.CatchUpSeconds = at.Sub(start).Seconds()
		}
	}

	// Drain: the consumers read up to the end offsets.
	dctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer cancel()
	ends, err := tr.settledEndOffsets(dctx, ps)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	for _, e := range ends {
		res.TopicRecords += e
	}
	if cs != nil {
		tr.mon.setPhase(phaseDrain, &tr.consAll, 0)
		target := ends
		if ps.txns != nil {
			// A read_committed consumer never sees the markers: it is
			// done after the last committed record of each partition.
			target = ps.ackedEnd()
		}
		select {
		case <-track.setTarget(target):
		case <-dctx.Done():
			return fmt.Errorf("drain: consumers read %d of %d records: %w", tr.consAll.records.Load(), res.TopicRecords, dctx.Err())
		}
		if err := cs.stop(); err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		res.Consumed, res.Duplicates = tr.consAll.records.Load(), track.dups.Load()
		if cfg.ConsumeMode == ConsumeGroup {
			res.Group = groupStats(cfg, cs, rbs)
		}
		if last := track.lastMeasured.Load(); last > 0 {
			res.Consume = throughput(track.measured.records.Load(), track.measured.bytes.Load(), time.Unix(0, last).Sub(win.start))
		}
	}
	if ps.txns != nil {
		ps.txns.mu.Lock()
		res.Transactions, res.TxnMarkers = ps.txns.commits, ps.txns.markers
		ps.txns.mu.Unlock()
	}
	if err := tr.checkCounts(); err != nil {
		return err
	}

	// Read-back: everything again from offset 0, from the page cache.
	if cfg.ReadBack {
		if err := tr.readBackPhase(dctx, ends); err != nil {
			return err
		}
	}
	// Raw read-back: the same again with raw Fetch requests.
	if cfg.RawReadBack {
		var rb counters
		tr.mon.setPhase(phaseRawRead, &rb, rawReadPasses*res.TopicRecords)
		raw, err := rawReadBack(dctx, tr.br, ends, &rb, "")
		res.RawReadBack = &raw
		if err != nil {
			return err
		}
		if tr.name == TargetStrata { // the floor servers speak plaintext
			if err := tr.rawReadFloor(dctx, ends); err != nil {
				return err
			}
		}
	}
	return nil
}

// readBackPhase reads everything again, readBackPasses times, with
// franz-go consumers in a client process of their own (readback_proc.go).
func (tr *targetRun) readBackPhase(ctx context.Context, ends map[tp]int64) error {
	tr.mon.setPhase(phaseReadBack, nil, 0)
	rb, err := readBackProcess(ctx, tr.br, ends)
	if err != nil {
		return err
	}
	if rb.Records != tr.res.TopicRecords || len(rb.Passes) != readBackPasses {
		return fmt.Errorf("read back %d records in %d passes, topics hold %d", rb.Records, len(rb.Passes), tr.res.TopicRecords)
	}
	tr.res.ReadBack = rb
	return nil
}

// rawReadFloor starts the floor server (floor.go) on a copy of the
// broker's partitions, in memory and then in files, and reads each as the
// raw read-back read the broker.
func (tr *targetRun) rawReadFloor(ctx context.Context, ends map[tp]int64) error {
	var rb counters
	tr.mon.setPhase(phaseRawFloor, &rb, 2*rawReadPasses*tr.res.TopicRecords)
	for _, pageCache := range []bool{false, true} {
		fl, err := startFloor(ctx, tr.cfg, tr.br, ends, pageCache)
		if err != nil {
			return fmt.Errorf("floor server: %w", err)
		}
		raw, err := rawReadBack(ctx, tr.br, ends, &rb, fl.addr)
		if pageCache {
			tr.res.RawReadFloorPageCache = &raw
		} else {
			tr.res.RawReadFloor = &raw
		}
		if cerr := fl.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("floor server: %w", cerr)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// settledEndOffsets reads the partitions' end offsets after the run. A
// transaction's markers are written after its EndTxn is answered (by
// Kafka as by Strata), so with transactions it reads them again, for up
// to markersSettle, until they count every committed record and marker;
// checkCounts judges what it found.
func (tr *targetRun) settledEndOffsets(ctx context.Context, ps *producers) (map[tp]int64, error) {
	deadline := time.Now().Add(markersSettle)
	for {
		ends, err := endOffsets(ctx, tr.br, tr.res.Topics)
		if err != nil || ps.txns == nil {
			return ends, err
		}
		ps.txns.mu.Lock()
		want := tr.prodAll.records.Load() + ps.txns.markers
		ps.txns.mu.Unlock()
		var sum int64
		for _, e := range ends {
			sum += e
		}
		if sum >= want || time.Now().After(deadline) {
			return ends, nil
		}
		select {
		case <-ctx.Done():
			return ends, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// markersSettle bounds the wait for the last transactions' markers.
const markersSettle = 10 * time.Second

// checkCounts compares what was acknowledged, stored and consumed.
func (tr *targetRun) checkCounts() error {
	res := tr.res
	if tr.cfg.TxnRecords > 0 {
		// Each committed transaction wrote a marker per partition it
		// touched; the consumers read the records, not the markers.
		acked := tr.prodAll.records.Load()
		if tr.prodAll.errors.Load() == 0 && acked+res.TxnMarkers != res.TopicRecords {
			return fmt.Errorf("committed %d records in %d transactions with %d markers, topics hold %d offsets", acked, res.Transactions, res.TxnMarkers, res.TopicRecords)
		}
		if tr.cfg.Consumers > 0 && res.Consumed != acked {
			return fmt.Errorf("a read_committed consumer read %d distinct records, %d were committed", res.Consumed, acked)
		}
		return nil
	}
	if tr.cfg.Acks != "0" && tr.prodAll.errors.Load() == 0 && tr.prodAll.records.Load() != res.TopicRecords {
		return fmt.Errorf("acknowledged %d records, topics hold %d", tr.prodAll.records.Load(), res.TopicRecords)
	}
	if tr.cfg.Consumers > 0 && res.Consumed != res.TopicRecords {
		return fmt.Errorf("consumed %d distinct records, topics hold %d", res.Consumed, res.TopicRecords)
	}
	return nil
}

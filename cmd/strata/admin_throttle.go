package main

// Replication throttles while a plan moves, set and cleared exactly as
// kafka-reassign-partitions --throttle does (broker/replica/throttle.go
// enforces them): the dynamic broker configs
// leader.replication.throttled.rate and follower.replication.throttled.rate
// on every broker holding or receiving a replica of a moving partition,
// and the topic configs leader.replication.throttled.replicas (the
// partition's existing replicas) and follower.replication.throttled.replicas
// (its adding replicas) as partition:broker lists, through
// IncrementalAlterConfigs.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	leaderThrottledRate       = "leader.replication.throttled.rate"
	followerThrottledRate     = "follower.replication.throttled.rate"
	leaderThrottledReplicas   = "leader.replication.throttled.replicas"
	followerThrottledReplicas = "follower.replication.throttled.replicas"
)

// throttles are the throttle configs of a plan.
type throttles struct {
	brokers []int32                      // sorted
	topics  map[string]topicThrottleList // by topic
}

// topicThrottleList is a topic's two partition:broker lists.
type topicThrottleList struct{ leader, follower string }

// planThrottles computes the throttles of p: for each partition that
// copies replicas, its existing replicas on the leader side and its
// adding replicas on the follower side. A move that only reorders
// copies nothing and is not throttled.
func planThrottles(p plan) throttles {
	th := throttles{topics: map[string]topicThrottleList{}}
	lead, follow := map[string][]string{}, map[string][]string{}
	for _, m := range p.Moves {
		adding := m.Adding()
		if len(adding) == 0 {
			continue
		}
		for _, b := range m.From {
			lead[m.Topic] = append(lead[m.Topic], fmt.Sprintf("%d:%d", m.Partition, b))
		}
		for _, b := range adding {
			follow[m.Topic] = append(follow[m.Topic], fmt.Sprintf("%d:%d", m.Partition, b))
		}
		for _, b := range append(slices.Clone(m.From), m.To...) {
			if !slices.Contains(th.brokers, b) {
				th.brokers = append(th.brokers, b)
			}
		}
	}
	slices.Sort(th.brokers)
	for t, l := range lead {
		th.topics[t] = topicThrottleList{leader: strings.Join(l, ","), follower: strings.Join(follow[t], ",")}
	}
	return th
}

func (th throttles) topicNames() []string {
	var ts []string
	for t := range th.topics {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

// set writes the throttles with rate bytes per second.
func (th throttles) set(ctx context.Context, adm *kadm.Client, rate int64) error {
	r := strconv.FormatInt(rate, 10)
	if len(th.brokers) > 0 {
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
			{Name: leaderThrottledRate, Value: &r}, {Name: followerThrottledRate, Value: &r},
		}, th.brokers...)
		if err := alterErr("broker", err, rs); err != nil {
			return err
		}
	}
	for _, t := range th.topicNames() {
		l := th.topics[t]
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Name: leaderThrottledReplicas, Value: &l.leader}, {Name: followerThrottledReplicas, Value: &l.follower},
		}, t)
		if err := alterErr("topic", err, rs); err != nil {
			return err
		}
	}
	return nil
}

// clear deletes the throttles.
func (th throttles) clear(ctx context.Context, adm *kadm.Client) error {
	_, err := clearThrottles(ctx, adm, th.brokers, th.topicNames())
	return err
}

// clearLogged clears the throttles after a failure, saying so when it
// cannot.
func (th throttles) clearLogged(adm *kadm.Client) {
	if len(th.brokers) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := th.clear(ctx, adm); err != nil {
		fmt.Fprintf(os.Stderr, "warning: clear replication throttles: %v\n", err)
	}
}

// clearThrottles deletes the throttle rates of brokers and the throttled
// replica lists of topics; nil brokers or topics mean those where one is
// set (per broker, or on a topic). It describes what it cleared.
func clearThrottles(ctx context.Context, adm *kadm.Client, brokers []int32, topics []string) (string, error) {
	var err error
	if brokers == nil {
		if brokers, err = throttledBrokers(ctx, adm); err != nil {
			return "", err
		}
	}
	if topics == nil {
		if topics, err = throttledTopics(ctx, adm); err != nil {
			return "", err
		}
	}
	if len(brokers) > 0 {
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: leaderThrottledRate}, {Op: kadm.DeleteConfig, Name: followerThrottledRate},
		}, brokers...)
		if err := alterErr("broker", err, rs); err != nil {
			return "", err
		}
	}
	if len(topics) > 0 {
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: leaderThrottledReplicas}, {Op: kadm.DeleteConfig, Name: followerThrottledReplicas},
		}, topics...)
		if err := alterErr("topic", err, rs); err != nil {
			return "", err
		}
	}
	var what []string
	if len(brokers) > 0 {
		what = append(what, "brokers "+idList(brokers))
	}
	if len(topics) > 0 {
		what = append(what, "topics "+strings.Join(topics, ", "))
	}
	return strings.Join(what, "; "), nil
}

// throttledBrokers are the brokers with a throttle rate of their own.
func throttledBrokers(ctx context.Context, adm *kadm.Client) ([]int32, error) {
	bd, err := adm.ListBrokers(ctx)
	if err != nil {
		return nil, err
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, bd.NodeIDs()...)
	if err != nil {
		return nil, err
	}
	var out []int32
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if (c.Key == leaderThrottledRate || c.Key == followerThrottledRate) && c.Source == kmsg.ConfigSourceDynamicBrokerConfig {
				id, _ := strconv.ParseInt(rc.Name, 10, 32)
				out = append(out, int32(id))
				break
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// throttledTopics are the topics with a throttled replica list.
func throttledTopics(ctx context.Context, adm *kadm.Client) ([]string, error) {
	td, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	if len(td.Names()) == 0 {
		return nil, nil
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, td.Names()...)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if (c.Key == leaderThrottledReplicas || c.Key == followerThrottledReplicas) && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				out = append(out, rc.Name)
				break
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// alterErr is the first error of an IncrementalAlterConfigs.
func alterErr(kind string, err error, rs kadm.AlterConfigsResponses) error {
	if err != nil {
		return kadmErr(err)
	}
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("%s %s: %s%s", kind, r.Name, errName(r.Err), paren(r.ErrMessage))
		}
	}
	return nil
}

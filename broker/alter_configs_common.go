package broker

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/config"
	"strata/controller"
)

// alterResource applies one AlterConfigs or IncrementalAlterConfigs
// resource. topic and broker compute the resource's new overrides from its
// current ones; the result is stored unless validateOnly. It returns the
// resource's error code and message.
func (s *Server) alterResource(md *controller.Metadata, cc *clientConn, rtype kmsg.ConfigResourceType, name string, validateOnly bool,
	topic func(current map[string]string) (map[string]string, error),
	broker func(perBroker bool, current map[string]string) (map[string]string, error),
) (int16, *string) {
	if code := s.configsRefusal(cc, acl.OpAlterConfigs, rtype, name); code != 0 { // authz.go
		return code, nil
	}
	var err error
	switch rtype {
	case kmsg.ConfigResourceTypeTopic:
		t := md.Topics[name]
		if t == nil {
			return kerr.UnknownTopicOrPartition.Code, nil
		}
		var m map[string]string
		if m, err = topic(t.Configs); err == nil && !validateOnly {
			err = s.ctrl.SetTopicConfigs(context.Background(), name, m)
		}
	case kmsg.ConfigResourceTypeBroker:
		// A broker's own configs are altered on it, as Kafka's tools do;
		// forwarded here by another broker, they are that broker's.
		self := s.brokerIDString()
		if from, ok := strings.CutPrefix(cc.clientID, forwardClientPrefix); ok {
			self = from
		}
		if name != "" && name != self {
			return kerr.InvalidRequest.Code, kmsg.StringPtr("unexpected broker id " + name + ", expected " + self + " or empty")
		}
		var m map[string]string
		if m, err = broker(name != "", md.BrokerConfigs[name]); err == nil {
			// Strata's own configs (strata.*) change only where the
			// cluster Alter hook admits the connection (interbroker.go).
			if strataConfigsChanged(md.BrokerConfigs[name], m) && !s.mayAlterClusterConfigs(cc) {
				return kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr("altering strata.* configs needs Alter on the cluster")
			}
			if name == s.brokerIDString() {
				err = s.validateTLSUpdate(md, m) // listeners.go
			}
			if err == nil && !validateOnly {
				err = s.ctrl.SetBrokerConfigs(context.Background(), name, m)
			}
		}
	default:
		return kerr.InvalidRequest.Code, kmsg.StringPtr("unsupported resource type")
	}
	if err != nil {
		return errCode(err), errMessage(err)
	}
	return 0, nil
}

// strataConfigsChanged tells whether next sets, changes or removes one of
// Strata's own configs held in cur.
func strataConfigsChanged(cur, next map[string]string) bool {
	for k, v := range next {
		if config.IsStrataConfig(k) && cur[k] != v {
			return true
		}
	}
	for k := range cur {
		if _, ok := next[k]; config.IsStrataConfig(k) && !ok {
			return true
		}
	}
	return false
}

// applyConfigChanges pushes stored config changes to the logs.
func (s *Server) applyConfigChanges(validateOnly bool) {
	if validateOnly {
		return
	}
	if err := s.reconcile(s.ctrl.Metadata()); err != nil {
		s.log.Error("apply configs", "err", err)
	}
}

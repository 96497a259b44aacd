package zk

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"strata/controller"
)

// Kafka's znode paths.
const (
	clusterIDPath      = "/cluster/id"
	brokerIDsPath      = "/brokers/ids"
	topicsPath         = "/brokers/topics"
	controllerPath     = "/controller"
	controllerEpochPth = "/controller_epoch"
	topicConfigsPath   = "/config/topics"
	brokerConfigsPath  = "/config/brokers"
	configChangesPath  = "/config/changes"
	userConfigsPath    = "/config/users"
	deleteTopicsPath   = "/admin/delete_topics"
	producerIDPath     = "/latest_producer_id_block"
)

// defaultBrokerEntity names the cluster-wide dynamic broker config.
const defaultBrokerEntity = "<default>"

// persistentPaths exist in every cluster; any broker creates the missing ones.
var persistentPaths = []string{
	"/cluster", "/brokers", brokerIDsPath, topicsPath, "/config", topicConfigsPath,
	brokerConfigsPath, configChangesPath, userConfigsPath, "/admin", deleteTopicsPath,
}

func brokerPath(id int32) string     { return brokerIDsPath + "/" + strconv.Itoa(int(id)) }
func topicPath(t string) string      { return topicsPath + "/" + t }
func partitionsPath(t string) string { return topicPath(t) + "/partitions" }
func partitionPath(t string, p int32) string {
	return partitionsPath(t) + "/" + strconv.Itoa(int(p))
}
func statePath(t string, p int32) string { return partitionPath(t, p) + "/state" }
func topicConfigPath(t string) string    { return topicConfigsPath + "/" + t }
func deleteTopicPath(t string) string    { return deleteTopicsPath + "/" + t }

func brokerEntity(b string) string {
	if b == "" {
		return defaultBrokerEntity
	}
	return b
}

func nowMillis() string { return strconv.FormatInt(time.Now().UnixMilli(), 10) }

// brokerZNode is /brokers/ids/<id>, version 5: every advertised listener
// in endpoints (NAME://host:port) with its protocol in
// listener_security_protocol_map; host and port are the PLAINTEXT
// listener's, or null and -1 without one, as Kafka writes them.
type brokerZNode struct {
	ListenerMap map[string]string `json:"listener_security_protocol_map"`
	Endpoints   []string          `json:"endpoints"`
	Rack        *string           `json:"rack,omitempty"`
	JMXPort     int               `json:"jmx_port"`
	Host        *string           `json:"host"`
	Port        int32             `json:"port"`
	Timestamp   string            `json:"timestamp"`
	Version     int               `json:"version"`
}

// brokerEndpoints are b's endpoints, or one PLAINTEXT endpoint at
// Host:Port when it has none recorded.
func brokerEndpoints(b controller.Broker) []controller.Endpoint {
	if len(b.Endpoints) > 0 {
		return b.Endpoints
	}
	return []controller.Endpoint{{Listener: "PLAINTEXT", Host: b.Host, Port: b.Port}}
}

func encodeBroker(b controller.Broker) []byte {
	z := brokerZNode{
		ListenerMap: map[string]string{},
		Rack:        b.Rack,
		JMXPort:     -1,
		Port:        -1,
		Timestamp:   nowMillis(),
		Version:     5,
	}
	for _, e := range brokerEndpoints(b) {
		z.Endpoints = append(z.Endpoints, e.Listener+"://"+net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
		z.ListenerMap[e.Listener] = protocolName(e.SecurityProtocol)
		if e.Listener == "PLAINTEXT" && z.Host == nil {
			h := e.Host
			z.Host, z.Port = &h, e.Port
		}
	}
	out, _ := json.Marshal(z)
	return out
}

// protocolName is the name of Kafka's security protocol id.
func protocolName(id int16) string {
	switch id {
	case 1:
		return "SSL"
	case 2:
		return "SASL_PLAINTEXT"
	case 3:
		return "SASL_SSL"
	}
	return "PLAINTEXT"
}

func protocolID(name string) int16 {
	for id := int16(0); id < 4; id++ {
		if protocolName(id) == name {
			return id
		}
	}
	return 0
}

func decodeBroker(id int32, data []byte) (controller.Broker, error) {
	var z brokerZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return controller.Broker{}, fmt.Errorf("broker %d znode: %w", id, err)
	}
	b := controller.Broker{ID: id, Port: z.Port, Rack: z.Rack}
	if z.Host != nil {
		b.Host = *z.Host
	}
	// Since version 2 the endpoints are authoritative; host/port may be
	// null when there is no PLAINTEXT listener. A listener missing from
	// the protocol map is named after its protocol (version 2 wrote
	// PROTOCOL://host:port).
	for _, ep := range z.Endpoints {
		name, hp, ok := strings.Cut(ep, "://")
		if !ok {
			continue
		}
		h, p, err := net.SplitHostPort(hp)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			continue
		}
		proto, ok := z.ListenerMap[name]
		if !ok {
			proto = name
		}
		b.Endpoints = append(b.Endpoints, controller.Endpoint{Listener: name, Host: h, Port: int32(n), SecurityProtocol: protocolID(proto)})
	}
	if len(b.Endpoints) > 0 {
		b.Host, b.Port = b.Endpoints[0].Host, b.Endpoints[0].Port
	} else if b.Host != "" {
		b.Endpoints = []controller.Endpoint{{Listener: "PLAINTEXT", Host: b.Host, Port: b.Port}}
	}
	return b, nil
}

// controllerZNode is /controller.
type controllerZNode struct {
	Version   int    `json:"version"`
	BrokerID  int32  `json:"brokerid"`
	Timestamp string `json:"timestamp"`
}

func encodeController(id int32) []byte {
	out, _ := json.Marshal(controllerZNode{Version: 1, BrokerID: id, Timestamp: nowMillis()})
	return out
}

func decodeController(data []byte) (int32, error) {
	var z controllerZNode
	if err := json.Unmarshal(data, &z); err != nil {
		// Kafka before 0.9 wrote the bare id.
		n, err2 := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 32)
		if err2 != nil {
			return -1, fmt.Errorf("controller znode: %w", err)
		}
		return int32(n), nil
	}
	return z.BrokerID, nil
}

// topicZNode is /brokers/topics/<t>, version 3.
type topicZNode struct {
	Version          int                `json:"version"`
	TopicID          string             `json:"topic_id,omitempty"`
	Partitions       map[string][]int32 `json:"partitions"`
	AddingReplicas   map[string][]int32 `json:"adding_replicas"`
	RemovingReplicas map[string][]int32 `json:"removing_replicas"`
}

// reassigning is a topic's reassignments in progress: the adding and
// removing replicas of each partition being reassigned.
type reassigning struct {
	adding, removing map[int32][]int32
}

func encodeTopic(id [16]byte, assignment [][]int32) []byte {
	return encodeTopicFull(id, assignment, reassigning{})
}

func encodeTopicFull(id [16]byte, assignment [][]int32, r reassigning) []byte {
	z := topicZNode{
		Version:          3,
		TopicID:          base64.RawURLEncoding.EncodeToString(id[:]),
		Partitions:       map[string][]int32{},
		AddingReplicas:   map[string][]int32{},
		RemovingReplicas: map[string][]int32{},
	}
	for p, rs := range assignment {
		z.Partitions[strconv.Itoa(p)] = rs
		if a := r.adding[int32(p)]; len(a) > 0 {
			z.AddingReplicas[strconv.Itoa(p)] = a
		}
		if a := r.removing[int32(p)]; len(a) > 0 {
			z.RemovingReplicas[strconv.Itoa(p)] = a
		}
	}
	out, _ := json.Marshal(z)
	return out
}

// decodeTopic returns the topic id and the replicas of each partition, by
// index. Partitions must be numbered 0..n-1.
func decodeTopic(data []byte) ([16]byte, [][]int32, error) {
	id, assign, _, err := decodeTopicFull(data)
	return id, assign, err
}

// decodeTopicFull is decodeTopic with the reassignments in progress.
// Adding and removing replicas of unknown partitions, or that are not
// among the partition's replicas, are ignored.
func decodeTopicFull(data []byte) ([16]byte, [][]int32, reassigning, error) {
	var z topicZNode
	var id [16]byte
	r := reassigning{adding: map[int32][]int32{}, removing: map[int32][]int32{}}
	if err := json.Unmarshal(data, &z); err != nil {
		return id, nil, r, fmt.Errorf("topic znode: %w", err)
	}
	if z.TopicID != "" {
		b, err := base64.RawURLEncoding.DecodeString(z.TopicID)
		if err != nil || len(b) != 16 {
			return id, nil, r, fmt.Errorf("topic znode: bad topic_id %q", z.TopicID)
		}
		copy(id[:], b)
	}
	assign := make([][]int32, len(z.Partitions))
	for k, rs := range z.Partitions {
		p, err := strconv.Atoi(k)
		if err != nil || p < 0 || p >= len(assign) {
			return id, nil, r, fmt.Errorf("topic znode: partition %q out of 0..%d", k, len(assign)-1)
		}
		assign[p] = slices.Clone(rs)
	}
	for _, side := range []struct {
		in  map[string][]int32
		out map[int32][]int32
	}{{z.AddingReplicas, r.adding}, {z.RemovingReplicas, r.removing}} {
		for k, rs := range side.in {
			p, err := strconv.Atoi(k)
			if err != nil || p < 0 || p >= len(assign) || len(rs) == 0 {
				continue
			}
			if slices.ContainsFunc(rs, func(id int32) bool { return !slices.Contains(assign[p], id) }) {
				continue
			}
			side.out[int32(p)] = slices.Clone(rs)
		}
	}
	return id, assign, r, nil
}

// partitionState is /brokers/topics/<t>/partitions/<p>/state, version 1.
type partitionState struct {
	ControllerEpoch int32   `json:"controller_epoch"`
	Leader          int32   `json:"leader"`
	Version         int     `json:"version"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
}

func encodeState(s partitionState) []byte {
	s.Version = 1
	if s.ISR == nil {
		s.ISR = []int32{}
	}
	out, _ := json.Marshal(s)
	return out
}

func decodeState(data []byte) (partitionState, error) {
	var s partitionState
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("partition state znode: %w", err)
	}
	return s, nil
}

// configZNode is /config/topics/<t> and /config/brokers/<b>.
type configZNode struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

func encodeConfig(c map[string]string) []byte {
	if c == nil {
		c = map[string]string{}
	}
	out, _ := json.Marshal(configZNode{Version: 1, Config: c})
	return out
}

func decodeConfig(data []byte) (map[string]string, error) {
	var z configZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("config znode: %w", err)
	}
	if z.Config == nil {
		z.Config = map[string]string{}
	}
	return z.Config, nil
}

func encodeConfigChange(entity string) []byte {
	out, _ := json.Marshal(struct {
		Version    int    `json:"version"`
		EntityPath string `json:"entity_path"`
	}{2, entity})
	return out
}

// producerIDBlock is /latest_producer_id_block, version 1.
type producerIDBlock struct {
	Version    int    `json:"version"`
	Broker     int32  `json:"broker"`
	BlockStart string `json:"block_start"`
	BlockEnd   string `json:"block_end"`
}

func decodeProducerIDBlock(data []byte) (start, end int64, err error) {
	var z producerIDBlock
	if err := json.Unmarshal(data, &z); err != nil {
		return 0, 0, fmt.Errorf("producer id block znode: %w", err)
	}
	start, err1 := strconv.ParseInt(z.BlockStart, 10, 64)
	end, err2 := strconv.ParseInt(z.BlockEnd, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("producer id block znode: bad block %q..%q", z.BlockStart, z.BlockEnd)
	}
	return start, end, nil
}

// clusterIDZNode is /cluster/id.
type clusterIDZNode struct {
	Version string `json:"version"`
	ID      string `json:"id"`
}

func encodeUUID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func mustJSON(v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own plain structs reach here
	}
	return out
}

package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// loadListeners reads listeners, advertised.listeners,
// listener.security.protocol.map, inter.broker.listener.name (or
// security.inter.broker.protocol) and control.plane.listener.name, with
// Kafka's rules:
//
//   - every listener name is in the protocol map, which gives its
//     security protocol (the default map names each protocol after
//     itself);
//   - advertised.listeners names only listeners of listeners; a listener
//     it leaves out is advertised at its own address;
//   - the inter-broker listener is inter.broker.listener.name, else the
//     listener named after security.inter.broker.protocol; Strata takes
//     the only listener when there is one and neither is set;
//   - control.plane.listener.name, if set, is a listener other than the
//     inter-broker one;
//   - every SSL listener has a keystore (ssl.keystore.location, or
//     ssl.keystore.certificate.chain with ssl.keystore.key).
func (b *Broker) loadListeners(g getter) error {
	pm, err := ParseProtocolMap(g.str("listener.security.protocol.map"))
	if err != nil {
		return fmt.Errorf("listener.security.protocol.map: %w", err)
	}
	ports := map[int32]string{}
	for i := range b.Listeners {
		l := &b.Listeners[i]
		p, ok := pm[l.Name]
		if !ok {
			return fmt.Errorf("listeners: listener %s is not in listener.security.protocol.map (%s)", l.Name, g.str("listener.security.protocol.map"))
		}
		l.Protocol = p
		if l.Port != 0 {
			if other, dup := ports[l.Port]; dup {
				return fmt.Errorf("listeners: listeners %s and %s use the same port %d", other, l.Name, l.Port)
			}
			ports[l.Port] = l.Name
		}
	}
	b.AdvertisedListeners = append([]Listener(nil), b.Listeners...)
	if a, ok := g.m["advertised.listeners"]; ok {
		adv, err := ParseListeners(a)
		if err != nil {
			return fmt.Errorf("advertised.listeners: %w", err)
		}
		for _, al := range adv {
			i := b.listenerIndex(al.Name)
			if i < 0 {
				return fmt.Errorf("advertised.listeners: listener %s is not in listeners", al.Name)
			}
			if al.Port == 0 {
				return fmt.Errorf("advertised.listeners: listener %s: a port must be given, not 0", al.Name)
			}
			al.Protocol = b.Listeners[i].Protocol
			b.AdvertisedListeners[i] = al
		}
	}

	ibName, ibSet := g.m["inter.broker.listener.name"]
	_, protoSet := g.m["security.inter.broker.protocol"]
	switch {
	case ibSet && protoSet:
		return errors.New("inter.broker.listener.name: only one of inter.broker.listener.name and security.inter.broker.protocol may be set")
	case ibSet:
		b.InterBrokerListener = strings.ToUpper(strings.TrimSpace(ibName))
		if b.listenerIndex(b.InterBrokerListener) < 0 {
			return fmt.Errorf("inter.broker.listener.name: %s is not in listeners", b.InterBrokerListener)
		}
	default:
		b.InterBrokerListener = g.str("security.inter.broker.protocol")
		if b.listenerIndex(b.InterBrokerListener) < 0 {
			if !protoSet && len(b.Listeners) == 1 {
				b.InterBrokerListener = b.Listeners[0].Name
			} else {
				return fmt.Errorf("inter.broker.listener.name: no listener named %s among listeners; set inter.broker.listener.name", b.InterBrokerListener)
			}
		}
	}
	if cp, ok := g.m["control.plane.listener.name"]; ok {
		b.ControlPlaneListener = strings.ToUpper(strings.TrimSpace(cp))
		if b.listenerIndex(b.ControlPlaneListener) < 0 {
			return fmt.Errorf("control.plane.listener.name: %s is not in listeners", b.ControlPlaneListener)
		}
		if b.ControlPlaneListener == b.InterBrokerListener {
			return fmt.Errorf("control.plane.listener.name: must differ from the inter-broker listener %s", b.InterBrokerListener)
		}
	}
	r := b.Resolver(nil)
	for _, l := range b.Listeners {
		if l.Protocol != SSL && l.Protocol != SASLSSL {
			continue
		}
		if err := r.SSL(l.Name).check(l.Name); err != nil {
			return err
		}
	}
	for _, l := range b.Listeners {
		if l.Protocol != SASLPlaintext && l.Protocol != SASLSSL {
			continue
		}
		c, err := r.SASL(l.Name)
		if err != nil {
			return err
		}
		if err := c.check(l.Name); err != nil {
			return err
		}
		if l.Name != b.InterBrokerListener {
			continue
		}
		if !slices.Contains(c.Mechanisms, c.InterBrokerMechanism) {
			return fmt.Errorf("sasl.mechanism.inter.broker.protocol: %s is not enabled on the inter-broker listener %s (sasl.enabled.mechanisms=%s)", c.InterBrokerMechanism, l.Name, strings.Join(c.Mechanisms, ","))
		}
		if j := c.JAAS[c.InterBrokerMechanism]; j == nil || j.Options["username"] == "" {
			return fmt.Errorf("listener %s: the broker's own connections to other brokers authenticate with %s as listener.name.%s.%s.sasl.jaas.config's username and password; set them", l.Name, c.InterBrokerMechanism, strings.ToLower(l.Name), strings.ToLower(c.InterBrokerMechanism))
		}
	}
	return nil
}

func (b *Broker) listenerIndex(name string) int {
	for i, l := range b.Listeners {
		if l.Name == name {
			return i
		}
	}
	return -1
}

// Listener returns the listener of that name and its advertised form.
func (b *Broker) Listener(name string) (l, adv Listener, ok bool) {
	i := b.listenerIndex(name)
	if i < 0 {
		return Listener{}, Listener{}, false
	}
	adv = b.Listeners[i]
	if i < len(b.AdvertisedListeners) {
		adv = b.AdvertisedListeners[i]
	}
	return b.Listeners[i], adv, true
}

// InterBroker returns the inter-broker listener's name and protocol (the
// first listener for a Broker built by hand).
func (b *Broker) InterBroker() (name, protocol string) {
	return b.listenerProtocol(b.InterBrokerListener)
}

// ControlPlane returns the listener the controller uses to reach brokers:
// control.plane.listener.name, else the inter-broker listener.
func (b *Broker) ControlPlane() (name, protocol string) {
	if b.ControlPlaneListener != "" {
		return b.listenerProtocol(b.ControlPlaneListener)
	}
	return b.InterBroker()
}

func (b *Broker) listenerProtocol(name string) (string, string) {
	l, _, ok := b.Listener(name)
	if !ok && len(b.Listeners) > 0 {
		l = b.Listeners[0]
	}
	if l.Protocol == "" {
		l.Protocol = PLAINTEXT
	}
	return l.Name, l.Protocol
}

// SSLConfig is the TLS configuration of one listener (the ssl.* configs, each
// overridden by listener.name.<listener>.ssl.*).
type SSLConfig struct {
	KeystoreType, KeystoreLocation     string
	KeystoreChain, KeystoreKey         string // PEM, inline
	KeyPassword                        string
	TruststoreType, TruststoreLocation string
	TruststoreCerts                    string // PEM, inline
	ClientAuth                         string // none, requested, required
	EnabledProtocols                   []string
	CipherSuites                       []string
	EndpointIdentification             string // https or ""
	PrincipalMappingRules              string
}

// SSL returns listener's TLS configuration in force: for each ssl.*
// config, listener.name.<listener>.<config> if any layer sets it, else
// the config itself.
func (r Resolver) SSL(listener string) SSLConfig {
	prefix := "listener.name." + strings.ToLower(listener) + "."
	get := func(k string) string {
		if v, _, ok := r.Lookup(prefix + k); ok {
			return v
		}
		return r.String(k)
	}
	list := func(k string) []string {
		var out []string
		for _, e := range strings.Split(get(k), ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
		return out
	}
	return SSLConfig{
		KeystoreType:           get("ssl.keystore.type"),
		KeystoreLocation:       get("ssl.keystore.location"),
		KeystoreChain:          get("ssl.keystore.certificate.chain"),
		KeystoreKey:            get("ssl.keystore.key"),
		KeyPassword:            get("ssl.key.password"),
		TruststoreType:         get("ssl.truststore.type"),
		TruststoreLocation:     get("ssl.truststore.location"),
		TruststoreCerts:        get("ssl.truststore.certificates"),
		ClientAuth:             get("ssl.client.auth"),
		EnabledProtocols:       list("ssl.enabled.protocols"),
		CipherSuites:           list("ssl.cipher.suites"),
		EndpointIdentification: get("ssl.endpoint.identification.algorithm"),
		PrincipalMappingRules:  get("ssl.principal.mapping.rules"),
	}
}

// Check tells what is missing for listener to serve TLS, as the broker
// checks it at startup and on a dynamic update (AlterConfigs).
func (c SSLConfig) Check(listener string) error { return c.check(listener) }

// check tells what is missing for listener to serve TLS.
func (c SSLConfig) check(listener string) error {
	p := "listener " + listener + ": "
	switch {
	case c.KeystoreLocation != "" && (c.KeystoreChain != "" || c.KeystoreKey != ""):
		return errors.New(p + "set ssl.keystore.location or ssl.keystore.certificate.chain with ssl.keystore.key, not both")
	case c.KeystoreLocation == "" && (c.KeystoreChain == "") != (c.KeystoreKey == ""):
		return errors.New(p + "ssl.keystore.certificate.chain and ssl.keystore.key go together")
	case c.KeystoreLocation == "" && c.KeystoreChain == "":
		return errors.New(p + "an SSL listener needs a keystore: ssl.keystore.location (a PEM file with the key and its certificate chain), or ssl.keystore.certificate.chain and ssl.keystore.key")
	case c.TruststoreLocation != "" && c.TruststoreCerts != "":
		return errors.New(p + "set ssl.truststore.location or ssl.truststore.certificates, not both")
	case c.ClientAuth != "none" && c.ClientAuth != "" && c.TruststoreLocation == "" && c.TruststoreCerts == "":
		return fmt.Errorf("%sssl.client.auth=%s needs a truststore (ssl.truststore.location or ssl.truststore.certificates)", p, c.ClientAuth)
	}
	return nil
}

// Package listeners reads a broker's listeners the way Kafka configures
// them: `listeners` is a list of NAME://HOST:PORT, each name's security
// protocol is the name itself (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
// unless `listener.security.protocol.map` maps a custom name, and
// `advertised.listeners` gives, by name, the addresses clients are told.
package listeners

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Protocol is a listener's security protocol.
type Protocol string

const (
	Plaintext     Protocol = "PLAINTEXT"
	SSL           Protocol = "SSL"
	SASLPlaintext Protocol = "SASL_PLAINTEXT"
	SASLSSL       Protocol = "SASL_SSL"
)

// TLS reports whether the protocol runs over TLS.
func (p Protocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether clients authenticate with SASL.
func (p Protocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

var protocols = []Protocol{Plaintext, SSL, SASLPlaintext, SASLSSL}

// ErrInvalid refuses a listener configuration.
var ErrInvalid = errors.New("invalid listener configuration")

// Listener is one listener: its name (upper case, as Kafka normalises
// it), its protocol, the address it binds and the one it advertises.
type Listener struct {
	Name     string
	Protocol Protocol
	Bind     string // host:port; an empty host binds every interface
	// Advertise is the host:port clients are told, from
	// advertised.listeners; empty when it does not name the listener (the
	// broker then advertises the address it bound, as Kafka does).
	Advertise string
}

// Parse reads listeners ("NAME://HOST:PORT,..."), protocolMap
// ("NAME:PROTOCOL,...", may be empty) and advertised (same form as
// listeners, may be empty). Names and ports are unique; an advertised
// address names a listener, and is never 0.0.0.0 or an empty host.
func Parse(listeners, protocolMap, advertised string) ([]Listener, error) {
	pm, err := parseMap(protocolMap)
	if err != nil {
		return nil, err
	}
	binds, err := parseAddrs(listeners, "listeners")
	if err != nil {
		return nil, err
	}
	if len(binds) == 0 {
		return nil, fmt.Errorf("%w: no listener", ErrInvalid)
	}
	ads, err := parseAddrs(advertised, "advertised listeners")
	if err != nil {
		return nil, err
	}
	var out []Listener
	ports := map[string]string{}
	for _, b := range binds {
		proto, ok := pm[b.name]
		if !ok {
			proto = Protocol(b.name)
			if !slices.Contains(protocols, proto) {
				return nil, fmt.Errorf("%w: listener %s is not a security protocol and has none in the protocol map", ErrInvalid, b.name)
			}
		}
		_, port, _ := net.SplitHostPort(b.addr)
		if other, dup := ports[port]; dup && port != "0" {
			return nil, fmt.Errorf("%w: listeners %s and %s both use port %s", ErrInvalid, other, b.name, port)
		}
		ports[port] = b.name
		out = append(out, Listener{Name: b.name, Protocol: proto, Bind: b.addr})
	}
	for _, a := range ads {
		i := slices.IndexFunc(out, func(l Listener) bool { return l.Name == a.name })
		if i < 0 {
			return nil, fmt.Errorf("%w: advertised listener %s is not a listener", ErrInvalid, a.name)
		}
		if host, _, _ := net.SplitHostPort(a.addr); host == "" || host == "0.0.0.0" || host == "::" {
			return nil, fmt.Errorf("%w: listener %s would advertise %q: clients cannot connect to it", ErrInvalid, a.name, a.addr)
		}
		out[i].Advertise = a.addr
	}
	return out, nil
}

type namedAddr struct{ name, addr string }

// entries splits a comma-separated list, trimmed, without empty entries.
func entries(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parseAddrs reads "NAME://HOST:PORT,..."; names unique, upper-cased.
func parseAddrs(s, what string) ([]namedAddr, error) {
	var out []namedAddr
	seen := map[string]bool{}
	for _, item := range entries(s) {
		name, addr, ok := strings.Cut(item, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("%w: %s entry %q is not NAME://HOST:PORT", ErrInvalid, what, item)
		}
		name = strings.ToUpper(name)
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%w: %s entry %q: %v", ErrInvalid, what, item, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("%w: %s entry %q: port %q", ErrInvalid, what, item, port)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: %s name %s appears twice", ErrInvalid, what, name)
		}
		seen[name] = true
		out = append(out, namedAddr{name: name, addr: net.JoinHostPort(host, port)})
	}
	return out, nil
}

// parseMap reads "NAME:PROTOCOL,...".
func parseMap(s string) (map[string]Protocol, error) {
	out := map[string]Protocol{}
	for _, item := range entries(s) {
		name, proto, ok := strings.Cut(item, ":")
		p := Protocol(strings.ToUpper(proto))
		if !ok || name == "" || !slices.Contains(protocols, p) {
			return nil, fmt.Errorf("%w: protocol map entry %q is not NAME:PROTOCOL (one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", ErrInvalid, item)
		}
		name = strings.ToUpper(name)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: protocol map names %s twice", ErrInvalid, name)
		}
		out[name] = p
	}
	return out, nil
}

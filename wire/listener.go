package wire

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/wire/listeners"
	"github.com/kaas-dev/kaas/wire/sasl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Listener is one listener a Server serves: its name and security protocol
// (wire/listeners), the address it advertises, and what its protocol needs.
type Listener struct {
	Name      string
	Protocol  listeners.Protocol
	Advertise string // host:port
	// TLS serves SSL and SASL_SSL listeners (wire/tlsfiles).
	TLS *tls.Config
	// SASL authenticates the clients of SASL_PLAINTEXT and SASL_SSL
	// listeners.
	SASL *sasl.Config
	// Principals names the client of an SSL listener from its
	// certificate's subject (the CN when empty).
	Principals auth.PrincipalRules

	host string
	port int32
	// stats are its connection counters (nil: metrics off).
	stats *listenerStats
}

// prepare checks l and parses its advertised address.
func (l *Listener) prepare() error {
	if l.Name == "" {
		l.Name = string(listeners.Plaintext)
	}
	if l.Protocol == "" {
		l.Protocol = listeners.Plaintext
	}
	if l.Protocol.TLS() != (l.TLS != nil) {
		return fmt.Errorf("listener %s (%s): a TLS config is needed exactly for SSL and SASL_SSL", l.Name, l.Protocol)
	}
	if l.Protocol.SASL() && (l.SASL == nil || len(l.SASL.Mechanisms) == 0) {
		return fmt.Errorf("listener %s (%s): no SASL mechanism enabled", l.Name, l.Protocol)
	}
	host, portS, err := net.SplitHostPort(l.Advertise)
	if err != nil {
		return fmt.Errorf("listener %s: advertised address %q: %w", l.Name, l.Advertise, err)
	}
	port, err := strconv.Atoi(portS)
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("listener %s: advertised port %q", l.Name, portS)
	}
	l.host, l.port = host, int32(port)
	return nil
}

// brokers is the live brokers at the addresses of this listener, this
// broker at its own advertised one.
func (l *Listener) brokers(eng *engine.Engine) []engine.BrokerInfo {
	bs := eng.BrokersOn(l.Name)
	for i := range bs {
		if bs[i].Self {
			bs[i].Host, bs[i].Port = l.host, l.port
		}
	}
	return bs
}

// controller is the controller Metadata and DescribeCluster name to the
// clients of this listener, whose brokers are bs: one they can reach. An
// elected controller without this listener (listeners that differ between
// brokers, as in a rolling change of them) is not named; this broker is
// instead, since any kaas broker serves controller requests.
func (l *Listener) controller(eng *engine.Engine, zone string, bs []engine.BrokerInfo) int32 {
	id := eng.ControllerFor(zone)
	if id < 0 {
		return id
	}
	self := int32(-1)
	for _, b := range bs {
		if b.ID == id {
			return id
		}
		if b.Self {
			self = b.ID
		}
	}
	return self
}

// address is where a client of this listener reaches broker b.
func (l *Listener) address(eng *engine.Engine, b engine.BrokerInfo) (string, int32) {
	if b.Self {
		return l.host, l.port
	}
	for _, o := range eng.BrokersOn(l.Name) {
		if o.ID == b.ID {
			return o.Host, o.Port
		}
	}
	return b.Host, b.Port
}

// start readies a new connection before its first request: on a TLS
// listener the handshake, bounded by FrameTimeout, and on SSL the
// principal its client certificate names; on a SASL listener, the session
// that authenticates it.
func (c *conn) start() error {
	l := c.listener
	if l.Protocol.SASL() {
		c.sasl = sasl.NewSession(l.SASL)
	}
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	_ = tc.SetDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	if err := tc.HandshakeContext(c.readCtx); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	_ = tc.SetDeadline(time.Time{})
	if l.Protocol == listeners.SSL {
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
			p, err := l.Principals.Principal(certs[0].Subject)
			if err != nil {
				return err
			}
			c.principal = p
		}
	}
	return nil
}

// saslGate refuses a request a SASL connection may not send now: anything
// but ApiVersions, SaslHandshake and SaslAuthenticate before it has
// authenticated, and anything once its session has expired without
// re-authentication (KIP-368). Kafka closes the connection for both.
func (c *conn) saslGate(key int16) error {
	if c.sasl == nil {
		return nil
	}
	if c.sasl.Expired() && key != 17 && key != 36 {
		return fmt.Errorf("the SASL session of %q expired without re-authentication", c.sasl.Principal())
	}
	if !c.sasl.Allowed(key) {
		return fmt.Errorf("%s before SASL authentication", kmsg.NameForKey(key))
	}
	return nil
}

// maxFrame bounds the next frame: Kafka's sasl.server.max.receive.size
// (512 KiB) until a SASL client has authenticated.
func (c *conn) maxFrame() int32 {
	if c.sasl != nil && c.sasl.Principal() == "" {
		return min(c.s.cfg.MaxFrameBytes, maxPreAuthFrame)
	}
	return c.s.cfg.MaxFrameBytes
}

const maxPreAuthFrame = 512 << 10

// rawToken answers one bare SASL message after a SaslHandshake v0: its
// answer goes back as a bare frame, and a failed exchange closes the
// connection (v0 has no way to say why).
func (c *conn) rawToken(frame []byte, charge int64) error {
	defer c.releaseCharge(charge)
	res := c.sasl.Authenticate(frame)
	if res.Done {
		c.rawSASL = false
	}
	c.countAuth(res)
	r := &reply{done: make(chan struct{}), raw: res.Reply, bare: true}
	if r.raw == nil {
		r.raw = []byte{}
	}
	if res.ErrCode != 0 {
		r.raw, r.closeAfter = nil, failedAuthDelay // v0 cannot say why: it closes
	}
	c.replies <- r
	close(r.done)
	return nil
}

// writeRaw writes a bare size-prefixed frame.
func (c *conn) writeRaw(r *reply) bool {
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(r.raw)), uint32(len(r.raw)))
	buf = append(buf, r.raw...)
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
	if _, err := c.nc.Write(buf); err != nil {
		c.cancel()
		_ = c.nc.Close()
		return false
	}
	return c.closeIfAsked(r)
}

// holdBack waits d before an answer; false means the connection closed
// meanwhile.
func (c *conn) holdBack(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// closeIfAsked closes the connection after an answer that asks for it;
// false means the connection is closed.
func (c *conn) closeIfAsked(r *reply) bool {
	if r.closeAfter <= 0 {
		return true
	}
	c.cancel()
	_ = c.nc.Close()
	return false
}

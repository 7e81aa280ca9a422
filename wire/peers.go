package wire

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
)

// Peers makes the engine's calls to other brokers (engine.Peers) over the
// Kafka protocol: transaction markers and transaction verifications
// (peer_txn.go), at the brokers' inter-broker addresses (engine.Brokers),
// with the inter-broker listener's TLS and SASL (PeerSecurity). One
// franz-go client per broker, which keeps its connection and negotiates
// versions; requests go straight to that broker's address, never routed.
type Peers struct {
	clientID string
	security PeerSecurity

	mu      sync.Mutex
	clients map[int32]peerClient
	closed  bool
}

var _ engine.Peers = (*Peers)(nil)

type peerClient struct {
	addr string
	cl   *kgo.Client
}

// NewPeers returns a Peers whose connections name clientID and reach the
// other brokers' inter-broker listeners with security.
func NewPeers(clientID string, security PeerSecurity) *Peers {
	return &Peers{clientID: clientID, security: security, clients: map[int32]peerClient{}}
}

// request sends req to broker to and returns its response.
func (p *Peers) request(ctx context.Context, to engine.BrokerInfo, req kmsg.Request) (kmsg.Response, error) {
	cl, err := p.client(to)
	if err != nil {
		return nil, err
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("peer client for broker %d has no broker", to.ID)
	}
	return seeds[0].Request(ctx, req)
}

func (p *Peers) client(to engine.BrokerInfo) (*kgo.Client, error) {
	addr := net.JoinHostPort(to.Host, strconv.Itoa(int(to.Port)))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("peer clients are closed")
	}
	if c, ok := p.clients[to.ID]; ok {
		if c.addr == addr {
			return c.cl, nil
		}
		c.cl.Close() // the broker came back at another address
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID(p.clientID),
		kgo.DialTimeout(peerDialTimeout),
		kgo.RequestTimeoutOverhead(10 * time.Second),
	}
	if d := p.security.dialer(); d != nil {
		opts = append(opts, kgo.Dialer(d))
	}
	if p.security.SASL != nil {
		opts = append(opts, kgo.SASL(p.security.SASL))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("peer client for broker %d at %s: %w", to.ID, addr, err)
	}
	p.clients[to.ID] = peerClient{addr: addr, cl: cl}
	return cl, nil
}

// Close closes every connection.
func (p *Peers) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for id, c := range p.clients {
		c.cl.Close()
		delete(p.clients, id)
	}
}

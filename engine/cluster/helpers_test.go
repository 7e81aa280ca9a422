package cluster

import (
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

const clusterDir = "data/__cluster"

// fakeClock is a Clock tests advance by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Duration
}

func (c *fakeClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t += d
}

// hookFS wraps a volume.FS with test hooks; nil hooks do nothing.
type hookFS struct {
	volume.FS
	beforeCreateExclusive func(name string)
	// afterCreateExclusive may wrap the new file (e.g. to pause its writes).
	afterCreateExclusive func(f volume.File) volume.File
	readDir              func(name string) ([]fs.DirEntry, error)
}

func (h *hookFS) CreateExclusive(name string) (volume.File, error) {
	if h.beforeCreateExclusive != nil {
		h.beforeCreateExclusive(name)
	}
	f, err := h.FS.CreateExclusive(name)
	if err == nil && h.afterCreateExclusive != nil {
		f = h.afterCreateExclusive(f)
	}
	return f, err
}

func (h *hookFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if h.readDir != nil {
		return h.readDir(name)
	}
	return h.FS.ReadDir(name)
}

// broker is one simulated broker: heartbeat, observer and elector over its
// own view of the shared volume.
type broker struct {
	id  int32
	inc string
	fs  volume.FS
	hb  *Heartbeater
	obs *Observer
	el  *Elector
}

func newBroker(fsys volume.FS, id int32, inc string, clock Clock, lease time.Duration) *broker {
	obs := NewObserver(lease, clock)
	return &broker{
		id: id, inc: inc, fs: fsys,
		hb:  NewHeartbeater(fsys, clusterDir, Heartbeat{BrokerID: id, KafkaAddr: fmt.Sprintf("b%d:9092", id), Incarnation: inc}),
		obs: obs,
		el:  NewElector(ElectorConfig{FS: fsys, ClusterDir: clusterDir, BrokerID: id, Incarnation: inc, Observer: obs}),
	}
}

// beat writes this broker's heartbeat.
func (b *broker) beat(t *testing.T) {
	t.Helper()
	if err := b.hb.Beat(); err != nil {
		t.Fatalf("broker %d beat: %v", b.id, err)
	}
}

// observe reads every heartbeat into this broker's observer.
func (b *broker) observe(t *testing.T) {
	t.Helper()
	hbs, err := ReadHeartbeats(b.fs, clusterDir)
	if err != nil {
		t.Fatalf("broker %d read heartbeats: %v", b.id, err)
	}
	b.obs.Observe(hbs)
}

// campaign runs one election round and fails the test on error.
func (b *broker) campaign(t *testing.T) Status {
	t.Helper()
	s, err := b.el.Campaign()
	if err != nil {
		t.Fatalf("broker %d campaign: %v", b.id, err)
	}
	return s
}

// claims returns the epochs of the claim files present, and how many of
// them parse.
func claims(t *testing.T, fsys volume.FS) (epochs []int32, valid map[int32]Claim) {
	t.Helper()
	ents, err := fsys.ReadDir(clusterDir + "/" + ControllerDir)
	if err != nil {
		t.Fatalf("list claims: %v", err)
	}
	valid = map[int32]Claim{}
	for _, e := range ents {
		n, ok := parseNumbered(e.Name())
		if !ok {
			continue
		}
		epochs = append(epochs, n)
		if c, found, err := (&Elector{fsys: fsys, clusterDir: clusterDir}).readClaim(n, true); err == nil && found && c != nil {
			valid[n] = *c
		}
	}
	return epochs, valid
}

package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kaas-dev/kaas/volume"
)

// Producer IDs are handed out from blocks. A block is reserved by creating
// <cluster>/producer-ids/<block>.json exclusively, and its file is durable
// before any ID in it is issued, so no ID is ever issued twice: not across
// restarts, crashes, or brokers. A block that was reserved and never used is
// simply skipped: IDs are plentiful (2^63), reuse is the bug.
const (
	producerIDDir       = "producer-ids"
	producerIDBlockSize = 1000
)

type producerIDBlock struct {
	Block  int64 `json:"block"`
	First  int64 `json:"first"`
	Last   int64 `json:"last"`
	Broker int32 `json:"broker"`
}

// ProducerIDs allocates producer IDs.
type ProducerIDs struct {
	fsys       volume.FS
	clusterDir string
	broker     int32

	mu       sync.Mutex
	next     int64 // next ID to issue from the current block
	last     int64 // last ID of the current block; next > last means none
	maxBlock int64 // highest block number known to exist

	issued atomic.Int64 // IDs handed out by this process (metrics)
}

// NewProducerIDs returns an allocator; it reserves nothing until asked.
func NewProducerIDs(fsys volume.FS, clusterDir string, broker int32) *ProducerIDs {
	return &ProducerIDs{fsys: fsys, clusterDir: clusterDir, broker: broker, next: 1, last: 0, maxBlock: -1}
}

// Next returns a producer ID never issued before.
func (p *ProducerIDs) Next() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next > p.last {
		if err := p.reserve(); err != nil {
			return -1, err
		}
	}
	id := p.next
	p.next++
	p.issued.Add(1)
	return id, nil
}

// Issued is how many producer IDs this allocator has handed out; it
// reads no volume.
func (p *ProducerIDs) Issued() int64 { return p.issued.Load() }

func (p *ProducerIDs) reserve() error {
	dir := path.Join(p.clusterDir, producerIDDir)
	if err := volume.MkdirAllSync(p.fsys, dir); err != nil {
		return fmt.Errorf("producer-id dir: %w", err)
	}
	// The listing only tells where to start probing; the exclusive create
	// decides. A stale listing costs extra EEXISTs, never a duplicate.
	ents, err := p.fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list producer-id blocks: %w", err)
	}
	for _, e := range ents {
		n, err := strconv.ParseInt(strings.TrimSuffix(e.Name(), ".json"), 10, 64)
		if err == nil && n > p.maxBlock {
			p.maxBlock = n
		}
	}
	for tries := 0; tries < 1000; tries++ {
		block := p.maxBlock + 1
		rec := producerIDBlock{Block: block, First: block*producerIDBlockSize + 1, Last: (block + 1) * producerIDBlockSize, Broker: p.broker}
		b, _ := json.Marshal(rec)
		err := volume.CreateExclusiveFile(p.fsys, path.Join(dir, fmt.Sprintf("%020d.json", block)), b)
		// Whatever happened, this block number is taken or tainted: never
		// probe it again. Even our own create that failed part-way (EEXIST
		// seen by both racers on some filesystems) is not used.
		p.maxBlock = block
		if err == nil {
			p.next, p.last = rec.First, rec.Last
			return nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("reserve producer-id block %d: %w", block, err)
		}
	}
	return errors.New("reserve producer-id block: too many contended blocks")
}

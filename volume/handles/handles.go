// Package handles is a process-wide cache of open files with a cap, so that
// the file descriptors a broker holds are bounded whatever the number of
// partitions it serves: an idle partition's files are closed and opened
// again on demand.
//
// A Handle names one file and how to open it. Acquire pins it and returns
// its open File, opening it first if it is closed; Release unpins it. A
// pinned handle is never closed, so a read in progress, or a range being
// sent with sendfile(2), never finds its descriptor closed (or reused for
// another file) under it. Unpinned handles are closed when the cache is at
// its cap and needs room (least recently used first, by the CLOCK
// approximation), when they have been idle for the idle timeout, and when
// their owner forgets them. A handle may also refuse to be closed while
// its owner says it must stay open (Evictable): a file with writes not yet
// fsynced is one, since closing it could lose the report of a write error.
//
// The cap is soft: when every open handle is pinned or refuses, an open
// goes over it rather than wait (a reader waiting for a slot while holding
// another could deadlock), and Stats counts it. When the OS refuses an open
// for want of descriptors (EMFILE, ENFILE), the cache lowers its cap below
// what it holds, closes what it can and tries once more.
//
// Lock order: an owner's own locks, then a Handle's, then the Cache's. The
// cache never calls back into an owner except Evictable, which must not
// block or take the owner's locks (read atomics).
//
// The four questions (docs/volume.md): a cached handle is a descriptor of a
// file its owner could have kept open; closing and reopening it by name
// changes nothing on the volume. The owners' files are named by what they
// hold (a segment's base offset and epoch), never reused for other
// contents while the owner lives, so a reopen finds the same file.
package handles

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// ErrForgotten is returned by Acquire of a handle its owner forgot.
var ErrForgotten = errors.New("handles: file handle forgotten")

// Defaults of the process-wide cache.
const (
	DefaultCap  = 4096
	DefaultIdle = 30 * time.Second
	// minCap is the least cap an EMFILE can lower the cache to.
	minCap = 16
	// emfileMargin is how far under what it holds the cache lowers its
	// cap after the OS refused an open for want of descriptors.
	emfileMargin = 16
)

// state bits of a Handle: the pin count below, flags above.
const (
	pinMask       = 1<<32 - 1
	flagOpen      = 1 << 32 // f is open
	flagClosing   = 1 << 33 // chosen for closing: no new pins
	flagForgotten = 1 << 34 // the owner is done: close at the last Release
)

// Handle is one cached file. Its zero value is not usable: use NewHandle.
type Handle struct {
	c         *Cache
	open      func() (volume.File, error)
	evictable func() bool

	// mu serialises opening and closing the file.
	mu    sync.Mutex
	state atomic.Uint64
	// f is the open file while flagOpen is set. It is written under mu
	// while no pin can be taken, and read by pinners.
	f volume.File
	// used is CLOCK's reference bit: set by Acquire, cleared by a sweep
	// of the eviction hand. lastUse is the cache's tick at the last
	// Release, for the idle timeout.
	used    atomic.Bool
	lastUse atomic.Int64
	// idx is the handle's place in Cache.open, -1 when not there (Cache.mu).
	idx int
}

// Cache is a cache of open files with a cap. It is safe for concurrent use.
type Cache struct {
	mu       sync.Mutex
	cap      int
	idleTick int64     // ticks a handle stays open unused
	open     []*Handle // open handles, unordered; CLOCK's ring
	hand     int       // CLOCK's hand into open
	reserved int       // opens in progress
	closing  int       // handles chosen for closing, not yet closed

	tick     atomic.Int64 // advanced by Sweep
	sweeping bool         // the idle sweeper runs (mu)
	interval time.Duration

	opens, evictions, idleCloses, overflows atomic.Int64
}

// Stats describes a cache.
type Stats struct {
	Cap  int // the current cap
	Open int // files open (or being opened or closed) now
	// Opens counts files opened, Evictions those closed to make room,
	// IdleCloses those closed for idleness, Overflows the opens that went
	// over the cap because nothing could be closed.
	Opens, Evictions, IdleCloses, Overflows int64
}

// NewCache returns a cache of at most capacity open files (at least 1)
// closing files unused for idle (0: never). The idle timeout is enforced
// by Sweep, which a goroutine started with the first open calls every
// idle/2 unless manual is set (tests call Sweep themselves).
func NewCache(capacity int, idle time.Duration, manual bool) *Cache {
	c := &Cache{cap: max(capacity, 1)}
	c.setIdle(idle)
	c.sweeping = manual
	return c
}

func (c *Cache) setIdle(idle time.Duration) {
	c.interval = idle / 2
	c.idleTick = 2
	if idle <= 0 {
		c.idleTick = 0
	}
}

var (
	defaultOnce  sync.Once
	defaultCache *Cache
)

// Default is the process-wide cache (DefaultCap files, DefaultIdle), which
// the broker sizes at start (SetCap) from its file-descriptor budget.
func Default() *Cache {
	defaultOnce.Do(func() { defaultCache = NewCache(DefaultCap, DefaultIdle, false) })
	return defaultCache
}

// SetIdle changes the idle timeout (0: never close for idleness).
func (c *Cache) SetIdle(idle time.Duration) {
	c.mu.Lock()
	c.setIdle(idle)
	c.mu.Unlock()
}

// SetCap changes the cap; handles over it are closed as others open.
func (c *Cache) SetCap(capacity int) {
	c.mu.Lock()
	c.cap = max(capacity, 1)
	c.mu.Unlock()
}

// Stats returns the cache's figures.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Cap: c.cap, Open: len(c.open) + c.reserved + c.closing,
		Opens: c.opens.Load(), Evictions: c.evictions.Load(), IdleCloses: c.idleCloses.Load(), Overflows: c.overflows.Load()}
}

// NewHandle returns a closed handle of c that opens its file with open.
// evictable, if not nil, is asked (under the cache's lock: it must only
// read atomics) before an unpinned handle is closed, and vetoes it.
func (c *Cache) NewHandle(open func() (volume.File, error), evictable func() bool) *Handle {
	return &Handle{c: c, open: open, evictable: evictable, idx: -1}
}

// Adopt returns a handle of c for f, a file just opened by open's means (a
// create), open and unpinned.
func (c *Cache) Adopt(f volume.File, open func() (volume.File, error), evictable func() bool) *Handle {
	h := c.NewHandle(open, evictable)
	c.mu.Lock()
	c.reserved++
	victims := c.makeRoomLocked()
	c.reserved--
	h.f = f
	c.addLocked(h)
	h.lastUse.Store(c.tick.Load())
	h.state.Store(flagOpen)
	c.mu.Unlock()
	c.opens.Add(1)
	c.closeVictims(victims, &c.evictions)
	c.startSweeper()
	return h
}

// Acquire pins h and returns its open file, opening it if it is closed. The
// file stays open until the matching Release. Open errors are returned
// as they are; ErrForgotten once the owner forgot h.
func (c *Cache) Acquire(h *Handle) (volume.File, error) {
	for {
		s := h.state.Load()
		if s&flagOpen == 0 || s&(flagClosing|flagForgotten) != 0 {
			break
		}
		if h.state.CompareAndSwap(s, s+1) {
			if !h.used.Load() { // no store (and cache-line traffic) when set
				h.used.Store(true)
			}
			return h.f, nil
		}
	}
	return c.acquireSlow(h)
}

func (c *Cache) acquireSlow(h *Handle) (volume.File, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		s := h.state.Load()
		if s&flagForgotten != 0 {
			return nil, ErrForgotten
		}
		if s&flagOpen == 0 {
			break
		}
		// Open, and not closing: closers hold h.mu.
		if h.state.CompareAndSwap(s, s+1) {
			h.used.Store(true)
			return h.f, nil
		}
	}
	f, err := c.openFor(h)
	if err != nil {
		return nil, err
	}
	h.f = f
	h.used.Store(true)
	c.mu.Lock()
	c.reserved--
	c.addLocked(h)
	c.mu.Unlock()
	// Add, not Store: a Forget may have set its flag meanwhile (the last
	// Release then closes the file).
	h.state.Add(flagOpen | 1)
	c.startSweeper()
	return f, nil
}

// openFor opens h's file in a reserved slot (still reserved on success),
// making room first; an EMFILE or ENFILE lowers the cap, makes room again
// and retries once.
func (c *Cache) openFor(h *Handle) (volume.File, error) {
	c.mu.Lock()
	c.reserved++
	victims := c.makeRoomLocked()
	c.mu.Unlock()
	c.closeVictims(victims, &c.evictions)
	f, err := h.open()
	if err != nil && (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) {
		c.mu.Lock()
		held := len(c.open) + c.reserved + c.closing
		c.cap = max(min(c.cap, held-emfileMargin), minCap)
		victims = c.makeRoomLocked()
		c.mu.Unlock()
		c.closeVictims(victims, &c.evictions)
		f, err = h.open()
	}
	if err != nil {
		c.mu.Lock()
		c.reserved--
		c.mu.Unlock()
		return nil, err
	}
	c.opens.Add(1)
	return f, nil
}

// Release unpins h. The last Release of a forgotten handle closes it.
func (c *Cache) Release(h *Handle) {
	if t := c.tick.Load(); h.lastUse.Load() != t {
		h.lastUse.Store(t)
	}
	for {
		s := h.state.Load()
		if s&pinMask == 0 {
			panic("handles: Release of a handle not acquired")
		}
		if h.state.CompareAndSwap(s, s-1) {
			if s&pinMask == 1 && s&flagForgotten != 0 {
				_ = c.closeUnpinned(h)
			}
			return
		}
	}
}

// Forget closes h now if nobody holds it, or at its last Release; later
// Acquires fail with ErrForgotten. It returns the close error, if it
// closed it.
func (c *Cache) Forget(h *Handle) error {
	for {
		s := h.state.Load()
		if s&flagForgotten != 0 || h.state.CompareAndSwap(s, s|flagForgotten) {
			break
		}
	}
	return c.closeUnpinned(h)
}

// closeUnpinned closes h if it is open and unpinned (a forgotten handle's
// close: from Forget or its last Release, whichever sees it unpinned).
func (c *Cache) closeUnpinned(h *Handle) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.state.Load()
	if s&flagOpen == 0 || s&pinMask != 0 || !h.state.CompareAndSwap(s, s|flagClosing) {
		return nil
	}
	c.mu.Lock()
	c.removeLocked(h)
	c.closing++
	c.mu.Unlock()
	return c.closeClaimed(h)
}

// closeClaimed closes h, claimed for closing (flagClosing set, h.mu held,
// counted in c.closing, out of c.open).
func (c *Cache) closeClaimed(h *Handle) error {
	f := h.f
	h.f = nil
	err := f.Close()
	h.state.And(^uint64(flagOpen | flagClosing))
	c.mu.Lock()
	c.closing--
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("close %s: %w", f.Name(), err)
	}
	return nil
}

// addLocked puts h in the ring of open handles.
func (c *Cache) addLocked(h *Handle) {
	h.idx = len(c.open)
	c.open = append(c.open, h)
}

// removeLocked takes h out of the ring.
func (c *Cache) removeLocked(h *Handle) {
	i := h.idx
	if i < 0 {
		return
	}
	last := len(c.open) - 1
	c.open[i] = c.open[last]
	c.open[i].idx = i
	c.open[last] = nil
	c.open = c.open[:last]
	h.idx = -1
	if c.hand >= len(c.open) {
		c.hand = 0
	}
}

// makeRoomLocked claims handles for closing until what the cache holds is
// within its cap, by CLOCK: a handle used since the hand last passed gets a
// second chance. It returns them (h.mu held, each to be closed with
// closeVictims); when nothing can be closed it counts an overflow.
func (c *Cache) makeRoomLocked() []*Handle {
	var victims []*Handle
	// The victims are closed before the caller opens anything: they count
	// as closed here.
	limit := 2 * len(c.open) // every handle seen twice: once to clear its bit
	for scanned := 0; len(c.open)+c.reserved+c.closing-len(victims) > c.cap; scanned++ {
		if len(c.open) == 0 || scanned >= limit {
			c.overflows.Add(1)
			break
		}
		if c.hand >= len(c.open) {
			c.hand = 0
		}
		h := c.open[c.hand]
		if h.used.Swap(false) || !c.claimLocked(h) {
			c.hand++
			continue
		}
		c.removeLocked(h)
		c.closing++
		victims = append(victims, h)
	}
	return victims
}

// claimLocked claims h for closing if it is open, unpinned and evictable:
// it leaves with h.mu held and flagClosing set, or reports false.
func (c *Cache) claimLocked(h *Handle) bool {
	if !h.mu.TryLock() {
		return false // being opened or closed
	}
	s := h.state.Load()
	if s&flagOpen == 0 || s&(pinMask|flagClosing) != 0 || (h.evictable != nil && !h.evictable()) ||
		!h.state.CompareAndSwap(s, s|flagClosing) {
		h.mu.Unlock()
		return false
	}
	return true
}

// closeVictims closes handles claimed by makeRoomLocked or Sweep, counting
// them in counter. A close error is dropped: an evictable handle has
// nothing unsynced.
func (c *Cache) closeVictims(victims []*Handle, counter *atomic.Int64) {
	for _, h := range victims {
		_ = c.closeClaimed(h)
		h.mu.Unlock()
		counter.Add(1)
	}
}

// Sweep advances the cache's clock by one tick and closes the unpinned,
// evictable handles unused for the idle timeout. The sweeper goroutine
// calls it every idle/2; tests call it themselves.
func (c *Cache) Sweep() {
	now := c.tick.Add(1)
	c.mu.Lock()
	if c.idleTick <= 0 {
		c.mu.Unlock()
		return
	}
	var victims []*Handle
	for i := 0; i < len(c.open); {
		h := c.open[i]
		if now-h.lastUse.Load() < c.idleTick || !c.claimLocked(h) {
			i++
			continue
		}
		c.removeLocked(h) // moves the last handle to i
		c.closing++
		victims = append(victims, h)
	}
	c.mu.Unlock()
	c.closeVictims(victims, &c.idleCloses)
}

// startSweeper starts the idle sweeper goroutine once.
func (c *Cache) startSweeper() {
	c.mu.Lock()
	if c.sweeping {
		c.mu.Unlock()
		return
	}
	c.sweeping = true
	c.mu.Unlock()
	go func() {
		for {
			c.mu.Lock()
			interval := c.interval
			c.mu.Unlock()
			if interval <= 0 {
				interval = time.Minute // no idle timeout now: look again later
			}
			time.Sleep(interval)
			c.Sweep()
		}
	}()
}

package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/volume"
)

// Claim is the content of <cluster>/controller/<epoch %020d>.json. A claim
// file is created exclusively by the broker that claims the epoch and is
// never rewritten or deleted, so epoch numbers are used once and the set of
// existing claims has no gaps: whoever creates epoch n+1 has seen n exist.
type Claim struct {
	Epoch       int32  `json:"epoch"`
	BrokerID    int32  `json:"brokerId"`
	Incarnation string `json:"incarnation"`
}

// ClaimPath is the claim file of a controller epoch.
func ClaimPath(clusterDir string, epoch int32) string {
	return path.Join(clusterDir, ControllerDir, fmt.Sprintf("%020d.json", epoch))
}

// maxProbe bounds how far one refresh probes past the listing, which may be
// seconds old. A refresh that hits the bound continues from there next time.
const maxProbe = 16

// ElectorConfig configures an Elector.
type ElectorConfig struct {
	FS          volume.FS
	ClusterDir  string
	BrokerID    int32
	Incarnation string
	// Observer decides whether the current controller is live, and its
	// clock times unreadable claims. Required.
	Observer *Observer
	// StaleClaimAfter is how long a claim file that is empty or does not
	// parse is waited for (it may be mid-write) before it counts as a burnt
	// epoch and the next one is claimed. Default: the observer's lease.
	StaleClaimAfter time.Duration
	Log             logr.Logger
}

// Status is what an Elector knows of the controller.
type Status struct {
	// Epoch is the highest controller epoch with a claim file seen, 0 if
	// none. It never decreases.
	Epoch int32
	// Controller is the broker whose claim Epoch is, or -1 when no claim
	// exists or the claim is (not yet) readable.
	Controller int32
	// IsController reports whether that claim is this elector's own (same
	// broker and incarnation).
	IsController bool
}

// Elector elects the controller by exclusive create of epoch-numbered claim
// files (docs/design.md §3): the controller is the holder of the highest claim.
// Campaign claims the next epoch when there is no claim, when the holder of
// the highest one is not live per the Observer, or when the highest claim
// has been unreadable for StaleClaimAfter. Every claim file seen, readable
// or not, is a higher claim: a controller that sees one steps down at once.
//
// Listings only hint where to look: every claim is read through Open, the
// listing is extended by probing epoch+1, epoch+2, … with Open, and the
// exclusive create decides. EEXIST is not taken as proof of a finished claim
// (GlusterFS can leave both racers with EEXIST and an empty file): the file
// is re-read. A claim by a broker the Observer has never seen gets one lease
// from its first sighting, like a first heartbeat does.
//
// Elector is safe for concurrent use; its methods run one at a time.
type Elector struct {
	fsys       volume.FS
	clusterDir string
	self       Claim // Epoch unused
	obs        *Observer
	staleAfter time.Duration
	log        logr.Logger

	mu        sync.Mutex
	top       int32         // highest epoch known to have a claim file
	claim     *Claim        // the claim at top, nil if none or unreadable
	topSeenAt time.Duration // when top was first seen, on the observer's clock
}

// NewElector returns an Elector; it touches the volume only when asked.
func NewElector(cfg ElectorConfig) *Elector {
	if cfg.StaleClaimAfter <= 0 {
		cfg.StaleClaimAfter = cfg.Observer.Lease()
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	return &Elector{
		fsys: cfg.FS, clusterDir: cfg.ClusterDir,
		self: Claim{BrokerID: cfg.BrokerID, Incarnation: cfg.Incarnation},
		obs:  cfg.Observer, staleAfter: cfg.StaleClaimAfter, log: cfg.Log,
	}
}

// Campaign refreshes what the elector knows of the claims and, if the
// cluster needs a controller (see Elector), tries to claim the next epoch.
// It returns the resulting status. Call it every heartbeat interval on
// every broker, after observing the heartbeats.
//
// An error means the state could not be decided this round (an unreadable
// directory, a create whose outcome is unknown); the status is still what
// the elector knows, and the next round re-drives it.
func (e *Elector) Campaign() (Status, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.refreshLocked(); err != nil {
		return e.statusLocked(), err
	}
	if !e.shouldClaimLocked() {
		return e.statusLocked(), nil
	}
	err := e.claimLocked(e.top + 1)
	return e.statusLocked(), err
}

// Verify reports whether this elector is still the controller, probing
// with Open for a claim above the one it holds. The controller calls it
// right before writing the assignment; it steps down if a higher claim
// exists. (A negative lookup cache can hide a very fresh claim: readers'
// controller-epoch check on the assignment is the fence behind this.)
func (e *Elector) Verify() (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.probeLocked(e.top, e.claim); err != nil {
		return false, err
	}
	return e.statusLocked().IsController, nil
}

// Current returns the highest controller epoch seen and its holder (-1 if
// none or unreadable), as of the last Campaign or Verify.
func (e *Elector) Current() (epoch, brokerID int32) {
	s := e.Status()
	return s.Epoch, s.Controller
}

// Status returns the status as of the last Campaign or Verify.
func (e *Elector) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.statusLocked()
}

func (e *Elector) statusLocked() Status {
	s := Status{Epoch: e.top, Controller: -1}
	if e.claim != nil {
		s.Controller = e.claim.BrokerID
		s.IsController = *e.claim == Claim{Epoch: e.top, BrokerID: e.self.BrokerID, Incarnation: e.self.Incarnation}
	}
	return s
}

// refreshLocked finds the highest claim: the listing, what this elector
// already knew (epochs only grow, a listing can lag), then probes upward.
func (e *Elector) refreshLocked() error {
	ents, err := e.fsys.ReadDir(path.Join(e.clusterDir, ControllerDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("list controller claims: %w", err)
	}
	top, c := e.top, e.claim
	for _, en := range ents {
		if n, ok := parseNumbered(en.Name()); ok && n > top {
			top = n
		}
	}
	if top > 0 && (top != e.top || c == nil) {
		// Listed (or known) claims exist: a missing one is a transient
		// lookup failure or a tampered directory, never "no claim".
		if c, _, err = e.readClaim(top, true); err != nil {
			return err
		}
	}
	return e.probeLocked(top, c)
}

// probeLocked looks for claims above top (whose claim is c) through Open
// and records the highest found.
func (e *Elector) probeLocked(top int32, c *Claim) error {
	for range maxProbe {
		next, found, err := e.readClaim(top+1, false)
		if err != nil {
			e.setTopLocked(top, c)
			return err
		}
		if !found {
			break
		}
		top, c = top+1, next
	}
	e.setTopLocked(top, c)
	return nil
}

func (e *Elector) setTopLocked(top int32, c *Claim) {
	if top < e.top {
		return // cannot happen: callers start from e.top; epochs only grow
	}
	was := e.statusLocked()
	if top != e.top {
		e.topSeenAt = e.obs.Now()
	}
	e.top, e.claim = top, c
	now := e.statusLocked()
	switch {
	case was.IsController && !now.IsController:
		e.log.Info("stepped down as controller", "epoch", was.Epoch, "newEpoch", now.Epoch, "newController", now.Controller)
	case !was.IsController && now.IsController:
		e.log.Info("became controller", "epoch", now.Epoch)
	case was != now:
		e.log.V(1).Info("controller claim", "epoch", now.Epoch, "controller", now.Controller)
	}
}

// shouldClaimLocked reports whether the cluster needs a new controller.
func (e *Elector) shouldClaimLocked() bool {
	if e.top == 0 {
		return true
	}
	now := e.obs.Now()
	c := e.claim
	switch {
	case c == nil:
		// Empty or unparseable: perhaps mid-write, perhaps a create whose
		// reply was lost, perhaps the GlusterFS both-EEXIST race.
		return now-e.topSeenAt >= e.staleAfter
	case c.BrokerID == e.self.BrokerID:
		// Ours, or an earlier incarnation of this broker: that one is dead.
		return c.Incarnation != e.self.Incarnation
	case e.obs.IsLive(c.BrokerID, c.Incarnation):
		return false
	case !e.obs.Known(c.BrokerID):
		// Never seen its heartbeat: the claim's first sighting starts
		// its lease.
		return now-e.topSeenAt >= e.obs.Lease()
	default:
		return true
	}
}

// claimLocked tries to create the claim for epoch. Whatever the create
// returns other than success, the file decides: it is re-read.
func (e *Elector) claimLocked(epoch int32) error {
	mine := Claim{Epoch: epoch, BrokerID: e.self.BrokerID, Incarnation: e.self.Incarnation}
	data, err := json.Marshal(mine)
	if err != nil {
		return fmt.Errorf("claim controller epoch %d: %w", epoch, err)
	}
	name := ClaimPath(e.clusterDir, epoch)
	err = volume.CreateExclusiveFile(e.fsys, name, data)
	if errors.Is(err, fs.ErrNotExist) {
		// The controller directory is missing (first claim ever).
		if merr := volume.MkdirAllSync(e.fsys, path.Dir(name)); merr != nil {
			return fmt.Errorf("claim controller epoch %d: %w", epoch, merr)
		}
		err = volume.CreateExclusiveFile(e.fsys, name, data)
	}
	if err == nil {
		e.setTopLocked(epoch, &mine)
		return nil
	}
	exists := errors.Is(err, fs.ErrExist)
	c, found, rerr := e.readClaim(epoch, exists)
	if rerr != nil {
		return fmt.Errorf("claim controller epoch %d: %w (re-read: %w)", epoch, err, rerr)
	}
	if !found {
		return fmt.Errorf("claim controller epoch %d: %w", epoch, err)
	}
	e.setTopLocked(epoch, c)
	switch {
	case c != nil && *c == mine:
		// Complete and ours, e.g. only the directory fsync failed: others
		// may already have read it, so it stands.
		e.log.Info("claimed controller epoch despite an error", "epoch", epoch, "error", err.Error())
		return nil
	case c != nil || exists:
		return nil // someone else won, or the race left an empty claim: wait it out
	default:
		// Our create was applied and its reply lost, leaving an empty file
		// we cannot prove is ours: it is stale after the timeout.
		return fmt.Errorf("claim controller epoch %d: %w", epoch, err)
	}
}

// readClaim reads the claim of epoch through Open. found reports whether
// the file exists; c is nil when it is empty or does not parse as a claim of
// that epoch. If known, the file is known to exist and an ENOENT is retried
// and then taken as unreadable, not as absent.
func (e *Elector) readClaim(epoch int32, known bool) (c *Claim, found bool, err error) {
	name := ClaimPath(e.clusterDir, epoch)
	b, err := volume.ReadFile(e.fsys, name)
	if err != nil && transientRead(err) && (known || !errors.Is(err, fs.ErrNotExist)) {
		b, err = readKnown(e.fsys, name)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, known, nil
	case errors.Is(err, syscall.ESTALE):
		return nil, true, nil // the name existed; unreadable for now
	case err != nil:
		return nil, false, fmt.Errorf("read controller claim %d: %w", epoch, err)
	}
	var cl Claim
	if json.Unmarshal(b, &cl) != nil || cl.Epoch != epoch || cl.BrokerID < 0 || cl.Incarnation == "" {
		return nil, true, nil
	}
	return &cl, true, nil
}

// CurrentClaim reads the highest controller claim, for readers that do not
// campaign (kaasctl). ok is false when there is no claim yet, or when the
// highest one is empty or torn (a controller is then being decided).
func CurrentClaim(fsys volume.FS, clusterDir string) (c Claim, ok bool, err error) {
	ents, err := fsys.ReadDir(path.Join(clusterDir, ControllerDir))
	if errors.Is(err, fs.ErrNotExist) {
		return Claim{}, false, nil
	}
	if err != nil {
		return Claim{}, false, fmt.Errorf("list controller claims: %w", err)
	}
	top := int32(-1)
	for _, en := range ents {
		if n, isClaim := parseNumbered(en.Name()); isClaim && n > top {
			top = n
		}
	}
	if top < 0 {
		return Claim{}, false, nil
	}
	b, err := readKnown(fsys, ClaimPath(clusterDir, top))
	if err != nil {
		return Claim{}, false, fmt.Errorf("read controller claim %d: %w", top, err)
	}
	if json.Unmarshal(b, &c) != nil || c.Epoch != top {
		return Claim{Epoch: top}, false, nil
	}
	return c, true, nil
}

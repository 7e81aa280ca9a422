package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/kaas-dev/kaas/volume"
)

// Heartbeat is the content of <cluster>/brokers/<id>.json. Only broker
// BrokerID writes it, always whole (volume.WriteFileAtomic). Nothing in it is
// a timestamp: liveness is decided by the Counter advancing, as seen on the
// observer's own clock (docs/design.md §2).
type Heartbeat struct {
	// Format is HeartbeatFormat in heartbeats of this kaas; absent (0) in
	// an older kaas's, whose brokers read only a base of format 1 and
	// publish what they hold in Open (the controller keeps writing what
	// they read while one is live).
	Format   int   `json:"format,omitempty"`
	BrokerID int32 `json:"brokerId"`
	// Counter grows by at least one with every write by one incarnation.
	Counter   uint64 `json:"counter"`
	KafkaAddr string `json:"kafkaAddr"`
	// Listeners holds, by listener name, the address each of the broker's
	// listeners advertises (Metadata answers a client with the addresses
	// of the listener it came through). KafkaAddr is the inter-broker
	// listener's; a heartbeat without Listeners has that one only.
	Listeners map[string]string `json:"listeners,omitempty"`
	AdminAddr string            `json:"adminAddr,omitempty"`
	Zone      string            `json:"zone,omitempty"`
	// Incarnation is unique per process start (a UUID). A new incarnation
	// may restart its counter; an observer counts the change as progress.
	Incarnation string `json:"incarnation"`
	// Leaving is set by a broker that is shutting down (SIGTERM): observers
	// treat it as not live at once, so the controller reassigns its
	// partitions without waiting out the lease.
	Leaving bool `json:"leaving,omitempty"`
	// Released is the assignment version whose releases this broker has
	// completed: it holds no partition, and has no open in flight of one,
	// that this version (or a later one it read) does not assign to it.
	// The controller completes a topic's delete only when every other live
	// broker has released the version that no longer names the topic
	// (lifecycle fencing, docs/design.md §5). Zero before the first.
	Released AssignmentVersion `json:"released"`
	// Report summarises the broker's partition report (report.go): the
	// partitions it is assigned and does not serve, and its reopen
	// requests, which others read only when the summary changed.
	Report ReportSummary `json:"report"`
	// Open and Reopen are what an older kaas published instead: every
	// partition it holds open, as "<topic>/<partition>@<topicID>", and its
	// reopen requests, as "...#<leaderEpoch>". They are read from the
	// heartbeats of an older kaas, and written only while one is live
	// (format 1, for it to read).
	Open   []string `json:"open,omitempty"`
	Reopen []string `json:"reopen,omitempty"`
	// MaxPartitions is how many partitions this broker can hold open (its
	// --max-partitions-per-broker budget), 0 if it has none: the admin
	// APIs refuse to make the cluster hold more than its live brokers'
	// budgets together.
	MaxPartitions int32 `json:"maxPartitions,omitempty"`
	// WrittenAt is the writer's wall clock at the write, in Unix
	// milliseconds: for people reading the file. Clocks of different hosts
	// are never compared for liveness (docs/design.md §2), except by the
	// wall-clock negative control of the chaos tests (Observer).
	WrittenAt int64 `json:"writtenAtUnixMilli,omitempty"`
	// Versions holds, by store ("acls", "quotas"), the version token of
	// what this broker has loaded and enforces: a change made on another
	// broker is in force here once this names the token the change wrote
	// (or a later one).
	Versions map[string]string `json:"versions,omitempty"`
}

// HeartbeatFormat is the heartbeat format of this kaas.
const HeartbeatFormat = 2

func (h Heartbeat) validate() error {
	switch {
	case h.BrokerID < 0:
		return fmt.Errorf("heartbeat: negative broker id %d", h.BrokerID)
	case h.Incarnation == "":
		return fmt.Errorf("heartbeat of broker %d: empty incarnation", h.BrokerID)
	}
	return nil
}

// HeartbeatPath is the heartbeat file of broker id.
func HeartbeatPath(clusterDir string, id int32) string {
	return path.Join(clusterDir, BrokersDir, strconv.FormatInt(int64(id), 10)+".json")
}

// WriteHeartbeat replaces broker hb.BrokerID's heartbeat file atomically,
// creating the brokers directory if it is missing. Only that broker calls
// it. An error may mean the new file is in place anyway (see
// volume.WriteFileAtomic); the next beat, with a higher counter, converges.
func WriteHeartbeat(fsys volume.FS, clusterDir string, hb Heartbeat) error {
	if err := hb.validate(); err != nil {
		return err
	}
	b, err := json.Marshal(hb)
	if err != nil {
		return fmt.Errorf("heartbeat of broker %d: %w", hb.BrokerID, err)
	}
	if err := writeAtomicMkdir(fsys, HeartbeatPath(clusterDir, hb.BrokerID), b); err != nil {
		return fmt.Errorf("heartbeat of broker %d: %w", hb.BrokerID, err)
	}
	return nil
}

// ReadHeartbeats reads every broker's heartbeat. The listing only names the
// files; each is read through Open, so its contents are fresh
// (close-to-open), and an ENOENT or ESTALE on a listed file is retried a few
// times. A file still missing after that is skipped (the listing was stale);
// temp files, other names, and files that do not parse or whose broker ID
// does not match their name are skipped.
//
// The heartbeats returned are valid even when err is not nil: err joins the
// files that could not be read for another reason (EIO, lasting ESTALE), so
// the caller can observe what it read and still report the rest. A missing
// brokers directory means no broker has ever beaten: nil, nil.
func ReadHeartbeats(fsys volume.FS, clusterDir string) ([]Heartbeat, error) {
	dir := path.Join(clusterDir, BrokersDir)
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read heartbeats: %w", err)
	}
	var (
		out  []Heartbeat
		errs []error
	)
	for _, e := range ents {
		id, ok := parseNumbered(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		b, err := readKnown(fsys, path.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var hb Heartbeat
		if json.Unmarshal(b, &hb) != nil || hb.BrokerID != id || hb.validate() != nil {
			continue // torn or foreign: not a heartbeat of this broker
		}
		out = append(out, hb)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("read heartbeats: %w", errors.Join(errs...))
	}
	return out, nil
}

// ReadHeartbeat reads broker id's heartbeat file through Open (fresh
// contents), retrying ENOENT and ESTALE a few times. An error wrapping
// fs.ErrNotExist means there is none; ErrNotHeartbeat, that the file does
// not hold a valid heartbeat of broker id.
func ReadHeartbeat(fsys volume.FS, clusterDir string, id int32) (Heartbeat, error) {
	b, err := readKnown(fsys, HeartbeatPath(clusterDir, id))
	if err != nil {
		return Heartbeat{}, fmt.Errorf("heartbeat of broker %d: %w", id, err)
	}
	var hb Heartbeat
	if json.Unmarshal(b, &hb) != nil || hb.BrokerID != id || hb.validate() != nil {
		return Heartbeat{}, fmt.Errorf("heartbeat of broker %d: %w", id, ErrNotHeartbeat)
	}
	return hb, nil
}

// ErrNotHeartbeat is a heartbeat file that does not parse or names
// another broker.
var ErrNotHeartbeat = errors.New("not a valid heartbeat")

// SupplantedError is what a Heartbeater returns once another process has
// written its broker's heartbeat file: a second process runs with the
// same broker ID. The two would take each other's partitions in turn
// forever, so the broker must stop.
type SupplantedError struct {
	BrokerID int32
	// Own is this process's incarnation, Other the one found in the file.
	Own, Other string
}

func (e *SupplantedError) Error() string {
	return fmt.Sprintf("broker %d's heartbeat was written by another process (incarnation %s; this one is %s): "+
		"two processes run with the same broker ID", e.BrokerID, e.Other, e.Own)
}

// Heartbeater writes one broker's heartbeats, each with a higher counter.
// It is safe for concurrent use.
//
// Once one of its writes has succeeded the file is its own: before each
// later write it reads the file back, and if another incarnation wrote it
// since (other than the one it replaced at start, see Replaces), it writes
// nothing more and returns a *SupplantedError from then on.
type Heartbeater struct {
	fsys       volume.FS
	clusterDir string

	mu    sync.Mutex
	hb    Heartbeat
	swept bool
	wall  func() time.Time

	replaces   string // the incarnation found at start, ignored
	wrote      bool   // the last write succeeded: the file holds hb
	supplanted *SupplantedError
}

// NewHeartbeater returns a Heartbeater for hb's broker; hb.Counter is the
// counter of the last beat (normally 0). It writes nothing until Beat.
func NewHeartbeater(fsys volume.FS, clusterDir string, hb Heartbeat) *Heartbeater {
	hb.Format = HeartbeatFormat
	return &Heartbeater{fsys: fsys, clusterDir: clusterDir, hb: hb, wall: time.Now}
}

// SetWallClock sets the clock WrittenAt is read from (time.Now by default).
func (h *Heartbeater) SetWallClock(now func() time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wall = now
}

// Replaces names the incarnation whose heartbeat this broker found in its
// file at start and judged dead (StartCheck). A stale read of the file can
// only show that one, and if that process was only paused it is the one to
// stop: it will find this incarnation in the file.
func (h *Heartbeater) Replaces(incarnation string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.replaces = incarnation
}

// Beat increments the counter and writes the heartbeat. The first Beat also
// removes temp files an earlier incarnation of this broker left behind
// (a crash between WriteFileAtomic's create and rename), best effort.
func (h *Heartbeater) Beat() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.beatLocked()
}

// Leave writes a last heartbeat marked Leaving, so that observers treat the
// broker as gone at once. Later Beats keep the mark.
func (h *Heartbeater) Leave() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hb.Leaving = true
	return h.beatLocked()
}

// SetOpen sets the open partitions the next beats publish.
func (h *Heartbeater) SetOpen(open []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hb.Open = open
}

// SetReopen sets the reopen requests the next beats publish.
func (h *Heartbeater) SetReopen(reopen []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hb.Reopen = reopen
}

// SetReleased sets the released assignment version the next beats
// publish.
func (h *Heartbeater) SetReleased(v AssignmentVersion) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hb.Released = v
}

// SetReport sets the partition report summary the next beats publish (of
// a report already written).
func (h *Heartbeater) SetReport(s ReportSummary) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hb.Report = s
}

// SetVersion sets the version token of store the next beats publish.
func (h *Heartbeater) SetVersion(store, token string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hb.Versions[store] == token {
		return
	}
	v := maps.Clone(h.hb.Versions)
	if v == nil {
		v = map[string]string{}
	}
	v[store] = token
	h.hb.Versions = v
}

// Last returns the heartbeat most recently attempted.
func (h *Heartbeater) Last() Heartbeat {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hb
}

func (h *Heartbeater) beatLocked() error {
	if err := h.checkOwnLocked(); err != nil {
		return err
	}
	if !h.swept {
		h.sweepTemps()
		h.swept = true
	}
	// The counter grows even if the write fails: a failed write may have
	// landed, and a counter must never be written twice with two meanings.
	h.hb.Counter++
	h.hb.WrittenAt = h.wall().UnixMilli()
	err := WriteHeartbeat(h.fsys, h.clusterDir, h.hb)
	h.wrote = err == nil
	return err
}

// checkOwnLocked returns the *SupplantedError once the file, which the
// last (successful) write made this incarnation's, holds another's. After
// a failed write nothing is concluded: the file may still hold what was
// there before.
func (h *Heartbeater) checkOwnLocked() error {
	if h.supplanted != nil {
		return h.supplanted
	}
	if !h.wrote {
		return nil
	}
	cur, err := ReadHeartbeat(h.fsys, h.clusterDir, h.hb.BrokerID)
	if err != nil || cur.Incarnation == h.hb.Incarnation || cur.Incarnation == h.replaces {
		return nil // unreadable this time: no evidence either way
	}
	h.supplanted = &SupplantedError{BrokerID: h.hb.BrokerID, Own: h.hb.Incarnation, Other: cur.Incarnation}
	return h.supplanted
}

// sweepTemps removes this broker's leftover heartbeat and partition
// report temp files. Only this broker writes them, so only it may remove
// them.
func (h *Heartbeater) sweepTemps() {
	dir := path.Join(h.clusterDir, BrokersDir)
	ents, err := h.fsys.ReadDir(dir)
	if err != nil {
		return
	}
	beat := path.Base(HeartbeatPath(h.clusterDir, h.hb.BrokerID))
	report := path.Base(ReportPath(h.clusterDir, h.hb.BrokerID))
	for _, e := range ents {
		if volume.IsTempNameOf(e.Name(), beat) || volume.IsTempNameOf(e.Name(), report) {
			_ = h.fsys.Remove(path.Join(dir, e.Name()))
		}
	}
}

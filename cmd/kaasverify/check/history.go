// Package check is kaasverify's history model and its "nothing lost"
// checks (L1–L9 of the kaas fault model, C1–C3 in L1's place on compacted
// topics): a history is a sequence of events written as JSON lines, one
// event per line, which a load tool, a test or a fault injector can append
// to; Check reads nothing but that history and is deterministic.
package check

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind says what an event records.
type Kind string

const (
	// KindSend is one produce and its outcome (Outcome, Offset when ok).
	KindSend Kind = "send"
	// KindPoll is one record a consumer read, with the high watermark of
	// the fetch it came in.
	KindPoll Kind = "poll"
	// KindFinal is one record of the final read: every partition from log
	// start to its high watermark, after faults stopped.
	KindFinal Kind = "final"
	// KindHWM is a high watermark (and last stable offset, when known)
	// observed by ListOffsets. With Process == FinalProcess it is instead
	// the range the final read covered: log start (Start) to HWM.
	KindHWM Kind = "hwm"
	// KindPID is a producer ID and epoch issued by InitProducerId.
	KindPID Kind = "pid"
	// KindCommit is an offset acknowledged by OffsetCommit.
	KindCommit Kind = "commit"
	// KindCommitted is an offset read back by OffsetFetch. It must be
	// recorded only for reads sent after the commits before it in the
	// history were acknowledged.
	KindCommitted Kind = "committed"
	// KindFault is a fault injected (for the report only).
	KindFault Kind = "fault"
	// KindTopic describes a topic: its cleanup policy (Cleanup). A topic
	// whose policy contains "compact" is checked by C1–C3 instead of L1,
	// and its sends, polls and final records carry Key and Tombstone.
	KindTopic Kind = "topic"
)

// Outcome is what a producer learnt about a send.
type Outcome string

const (
	// OK: acknowledged, at Offset.
	OK Outcome = "ok"
	// Fail: definitely not written (a definite broker error, or the
	// request was never sent).
	Fail Outcome = "fail"
	// Info: indeterminate (timeout, connection lost, retries exhausted).
	Info Outcome = "info"
)

// FinalProcess is the Process of the hwm events that bound the final read
// of a partition.
const FinalProcess = "final"

// Event is one line of a history. Which fields matter depends on Kind;
// integer fields that do not apply are -1 (and are left out of the JSON).
type Event struct {
	Kind Kind      `json:"kind"`
	Time time.Time `json:"time,omitzero"`
	// Process is the producer, consumer or observer that saw the event.
	Process   string `json:"process,omitempty"`
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value,omitempty"`
	// Key is the record's key on a compacted topic (send, poll, final).
	Key string `json:"key,omitempty"`
	// Tombstone marks a record with a null value (a delete of Key); its
	// Value is the id the tool sent in a header.
	Tombstone bool    `json:"tombstone,omitempty"`
	Outcome   Outcome `json:"outcome,omitempty"`
	Error     string  `json:"error,omitempty"`
	// HWM is the high watermark (poll: of the fetch; hwm: listed).
	HWM int64 `json:"hwm"`
	// LSO is the last stable offset, when listed.
	LSO int64 `json:"lso"`
	// Start is the log start offset (final-read bounds).
	Start      int64  `json:"start"`
	Group      string `json:"group,omitempty"`
	ProducerID int64  `json:"producer_id"`
	Epoch      int16  `json:"epoch"`
	// Fault and Target describe a fault event.
	Fault  string `json:"fault,omitempty"`
	Target string `json:"target,omitempty"`
	// Cleanup is a topic event's cleanup.policy ("delete", "compact",
	// "compact,delete").
	Cleanup string `json:"cleanup,omitempty"`
}

// Compacted reports whether a cleanup policy compacts.
func Compacted(cleanup string) bool { return strings.Contains(cleanup, "compact") }

// NewEvent returns an event of kind k with every "not applicable" integer
// field at -1; callers set what applies.
func NewEvent(k Kind) Event {
	return Event{Kind: k, Offset: -1, HWM: -1, LSO: -1, Start: -1, ProducerID: -1, Epoch: -1}
}

// AppendJSON appends e as one JSON object (no newline) to buf. It writes
// the same object encoding/json would, minus fields that do not apply, and
// allocates nothing for plain ASCII strings: it runs once per record.
func (e *Event) AppendJSON(buf []byte) []byte {
	buf = append(buf, `{"kind":`...)
	buf = appendString(buf, string(e.Kind))
	if !e.Time.IsZero() {
		buf = append(buf, `,"time":"`...)
		buf = e.Time.UTC().AppendFormat(buf, time.RFC3339Nano)
		buf = append(buf, '"')
	}
	str := func(name, v string) {
		if v != "" {
			buf = append(buf, `,"`...)
			buf = append(buf, name...)
			buf = append(buf, `":`...)
			buf = appendString(buf, v)
		}
	}
	num := func(name string, v int64) {
		if v >= 0 {
			buf = append(buf, `,"`...)
			buf = append(buf, name...)
			buf = append(buf, `":`...)
			buf = strconv.AppendInt(buf, v, 10)
		}
	}
	str("process", e.Process)
	if e.Topic != "" {
		str("topic", e.Topic)
		num("partition", int64(e.Partition))
	}
	num("offset", e.Offset)
	switch e.Kind {
	case KindSend, KindPoll, KindFinal:
		buf = append(buf, `,"value":`...)
		buf = appendString(buf, e.Value)
	default:
		str("value", e.Value)
	}
	str("key", e.Key)
	if e.Tombstone {
		buf = append(buf, `,"tombstone":true`...)
	}
	str("outcome", string(e.Outcome))
	str("error", e.Error)
	num("hwm", e.HWM)
	num("lso", e.LSO)
	num("start", e.Start)
	str("group", e.Group)
	if e.Kind == KindPID {
		num("producer_id", e.ProducerID)
		num("epoch", int64(e.Epoch))
	}
	str("fault", e.Fault)
	str("target", e.Target)
	str("cleanup", e.Cleanup)
	return append(buf, '}')
}

// MarshalJSON encodes e as AppendJSON does.
func (e Event) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil), nil }

// UnmarshalJSON decodes one event; integer fields that are absent are -1.
func (e *Event) UnmarshalJSON(b []byte) error {
	type plain Event // no methods: no recursion
	p := plain(NewEvent(""))
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*e = Event(p)
	if e.Kind == "" {
		return errors.New(`event without "kind"`)
	}
	return nil
}

// appendString appends s as a JSON string; only strings that need escaping
// go through encoding/json.
func appendString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(buf, q...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// Writer appends events to a history, one JSON line each. It is safe for
// concurrent use; the history's order is the order of Record calls. It
// writes only whole lines, each batch in one Write, so that other
// processes can append events (faults, say) to the same file opened with
// O_APPEND without tearing lines.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	n   int64
	err error
	now func() time.Time
}

// writerBatch is how many bytes of lines Writer gathers per Write.
const writerBatch = 256 << 10

// NewWriter returns a Writer appending to w. Events with a zero Time are
// stamped with the current time.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, buf: make([]byte, 0, writerBatch+4<<10), now: time.Now}
}

// Record appends e. The first write error sticks and is returned by Err
// and Flush.
func (w *Writer) Record(e Event) {
	if e.Time.IsZero() {
		e.Time = w.now()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	w.buf = append(e.AppendJSON(w.buf), '\n')
	w.n++
	if len(w.buf) >= writerBatch {
		w.writeLocked()
	}
}

func (w *Writer) writeLocked() {
	if len(w.buf) == 0 || w.err != nil {
		return
	}
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = fmt.Errorf("writing history: %w", err)
	}
	w.buf = w.buf[:0]
}

// Len returns how many events were recorded.
func (w *Writer) Len() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Err returns the first write error.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Flush writes buffered events out.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeLocked()
	return w.err
}

// maxLine bounds one history line (values are ids, not payloads, but
// other tools may record longer ones).
const maxLine = 64 << 20

// Read decodes a history: one JSON event per line; blank lines are skipped.
func Read(r io.Reader) ([]Event, error) {
	var evs []Event
	err := scan(r, func(e *Event) { evs = append(evs, *e) })
	return evs, err
}

// scan decodes a history line by line, handing each event to fn (which
// must not retain it).
func scan(r io.Reader, fn func(*Event)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), maxLine)
	var (
		d decoder
		e Event
	)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		if err := d.decode(b, &e); err != nil {
			return fmt.Errorf("history line %d: %w", line, err)
		}
		fn(&e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading history: %w", err)
	}
	return nil
}

// ReadFile decodes the history in file path.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening history: %w", err)
	}
	defer f.Close()
	evs, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return evs, nil
}

package check

import (
	"bytes"
	"errors"
	"strconv"
	"time"
)

// decoder decodes history lines. Lines as AppendJSON writes them (a flat
// object of plain strings, integers and booleans) take a fast path that interns the
// strings that repeat (kinds, processes, topics...); anything else goes
// through encoding/json.
type decoder struct {
	strs map[string]string
}

// maxInterned bounds the interned strings.
const maxInterned = 1 << 16

func (d *decoder) intern(b []byte) string {
	if s, ok := d.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if d.strs == nil {
		d.strs = map[string]string{}
	}
	if len(d.strs) < maxInterned {
		d.strs[s] = s
	}
	return s
}

var errSlow = errors.New("not a plain line")

func (d *decoder) decode(b []byte, e *Event) error {
	if err := d.fast(b, e); err == nil {
		return nil
	}
	return e.UnmarshalJSON(b)
}

// fast decodes b if it is a flat object of plain (escape-free) strings,
// integers and booleans, else returns errSlow.
func (d *decoder) fast(b []byte, e *Event) error {
	*e = NewEvent("")
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return errSlow
	}
	b = b[1:]
	str := func() ([]byte, bool) {
		if len(b) == 0 || b[0] != '"' {
			return nil, false
		}
		for i := 1; i < len(b); i++ {
			switch c := b[i]; {
			case c == '"':
				s := b[1:i]
				b = b[i+1:]
				return s, true
			case c == '\\' || c < 0x20:
				return nil, false
			}
		}
		return nil, false
	}
	num := func() (int64, bool) {
		i := 0
		if i < len(b) && b[i] == '-' {
			i++
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		n, err := strconv.ParseInt(string(b[:i]), 10, 64)
		b = b[i:]
		return n, err == nil
	}
	for {
		b = bytes.TrimLeft(b, " \t")
		key, ok := str()
		if !ok {
			return errSlow
		}
		b = bytes.TrimLeft(b, " \t")
		if len(b) == 0 || b[0] != ':' {
			return errSlow
		}
		b = bytes.TrimLeft(b[1:], " \t")
		switch string(key) {
		case "tombstone":
			switch {
			case bytes.HasPrefix(b, []byte("true")):
				e.Tombstone, b = true, b[4:]
			case bytes.HasPrefix(b, []byte("false")):
				e.Tombstone, b = false, b[5:]
			default:
				return errSlow
			}
		case "kind", "process", "topic", "outcome", "group", "fault", "target", "value", "error", "time", "key", "cleanup":
			s, ok := str()
			if !ok {
				return errSlow
			}
			switch string(key) {
			case "kind":
				e.Kind = Kind(d.intern(s))
			case "process":
				e.Process = d.intern(s)
			case "topic":
				e.Topic = d.intern(s)
			case "outcome":
				e.Outcome = Outcome(d.intern(s))
			case "group":
				e.Group = d.intern(s)
			case "fault":
				e.Fault = d.intern(s)
			case "target":
				e.Target = d.intern(s)
			case "key":
				e.Key = d.intern(s)
			case "cleanup":
				e.Cleanup = d.intern(s)
			case "value":
				e.Value = string(s)
			case "error":
				e.Error = string(s)
			case "time":
				t, err := time.Parse(time.RFC3339Nano, string(s))
				if err != nil {
					return errSlow
				}
				e.Time = t
			}
		case "partition", "offset", "hwm", "lso", "start", "producer_id", "epoch":
			n, ok := num()
			if !ok {
				return errSlow
			}
			switch string(key) {
			case "partition":
				e.Partition = int32(n)
				if int64(e.Partition) != n {
					return errSlow
				}
			case "offset":
				e.Offset = n
			case "hwm":
				e.HWM = n
			case "lso":
				e.LSO = n
			case "start":
				e.Start = n
			case "producer_id":
				e.ProducerID = n
			case "epoch":
				e.Epoch = int16(n)
				if int64(e.Epoch) != n {
					return errSlow
				}
			}
		default:
			return errSlow // unknown field: let encoding/json judge it
		}
		b = bytes.TrimLeft(b, " \t")
		switch {
		case len(b) > 0 && b[0] == ',':
			b = b[1:]
		case len(b) > 0 && b[0] == '}' && e.Kind != "":
			if len(bytes.TrimSpace(b[1:])) != 0 {
				return errSlow
			}
			return nil
		default:
			return errSlow
		}
	}
}

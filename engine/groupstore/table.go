package groupstore

import "slices"

// entry is the live value of one key and the offset of its last write.
// Values are never modified in place (an overwrite replaces the slice), so
// a value handed out by Records stays valid.
type entry struct {
	value  []byte
	offset int64
}

// table is the compacted view of the shard log: the last write of every
// key, tombstones removed. It is guarded by the Store's append lock.
type table struct {
	m map[string]*entry
	// bytes is the keys' and values' total size, to size snapshots.
	bytes int64
}

func newTable() table { return table{m: map[string]*entry{}} }

// put applies one record at offset; a nil value deletes the key. value is
// kept as given (callers pass a copy they own).
func (t *table) put(key, value []byte, offset int64) {
	e := t.m[string(key)] // no allocation for the lookup
	switch {
	case value == nil && e != nil:
		t.bytes -= int64(len(key) + len(e.value))
		delete(t.m, string(key))
	case value == nil:
	case e != nil:
		t.bytes += int64(len(value) - len(e.value))
		e.value, e.offset = value, offset
	default:
		t.m[string(key)] = &entry{value: value, offset: offset}
		t.bytes += int64(len(key) + len(value))
	}
}

// sorted returns the live records in the log order of their last write.
func (t *table) sorted() []Record {
	type kv struct {
		key string
		e   *entry
	}
	all := make([]kv, 0, len(t.m))
	for k, e := range t.m {
		all = append(all, kv{k, e})
	}
	slices.SortFunc(all, func(a, b kv) int {
		switch {
		case a.e.offset < b.e.offset:
			return -1
		case a.e.offset > b.e.offset:
			return 1
		}
		return 0
	})
	out := make([]Record, len(all))
	for i, x := range all {
		out[i] = Record{Key: []byte(x.key), Value: x.e.value}
	}
	return out
}

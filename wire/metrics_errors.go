package wire

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// firstErrorCode is the error a request is counted under: the answer's
// top-level ErrorCode when it has one that is set, else the first set
// ErrorCode of its entries (topics, partitions, ...), depth first; 0 when
// none is set or there is no answer (acks=0). Produce and Fetch, the hot
// path, are walked without reflection.
func firstErrorCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case nil:
		return 0
	case *kmsg.ProduceResponse:
		for ti := range r.Topics {
			for pi := range r.Topics[ti].Partitions {
				if c := r.Topics[ti].Partitions[pi].ErrorCode; c != 0 {
					return c
				}
			}
		}
		return 0
	case *kmsg.FetchResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for ti := range r.Topics {
			for pi := range r.Topics[ti].Partitions {
				if c := r.Topics[ti].Partitions[pi].ErrorCode; c != 0 {
					return c
				}
			}
		}
		return 0
	}
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0
	}
	return structErrorCode(v.Elem(), 0)
}

// maxErrorDepth bounds the walk (kmsg answers nest a few levels).
const maxErrorDepth = 6

var int16Type = reflect.TypeFor[int16]()

// structErrorCode walks a kmsg struct: its own ErrorCode first, then its
// slices of structs and struct fields, in field order.
func structErrorCode(v reflect.Value, depth int) int16 {
	if v.Kind() != reflect.Struct || depth > maxErrorDepth {
		return 0
	}
	if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Type() == int16Type {
		if c := int16(f.Int()); c != 0 {
			return c
		}
	}
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Slice:
			if f.Type().Elem().Kind() != reflect.Struct {
				continue
			}
			for j := range f.Len() {
				if c := structErrorCode(f.Index(j), depth+1); c != 0 {
					return c
				}
			}
		case reflect.Struct:
			if c := structErrorCode(f, depth+1); c != 0 {
				return c
			}
		}
	}
	return 0
}

package wire

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/partlog"
)

// randTags returns empty tags mostly, sometimes a few unknown ones.
func randTags(rng *rand.Rand) kmsg.Tags {
	var t kmsg.Tags
	if rng.IntN(4) == 0 {
		for i := rng.IntN(3); i >= 0; i-- {
			t.Set(uint32(10+rng.IntN(5)), randBytes(rng, rng.IntN(6)))
		}
	}
	return t
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// randFetchResponse builds a random answer; extras adds the fields kaas
// never sets (tags, brokers) so the whole shape is covered.
func randFetchResponse(rng *rand.Rand, version int16, extras bool) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	resp.ThrottleMillis = rng.Int32N(1000)
	resp.ErrorCode = int16(rng.IntN(3))
	resp.SessionID = rng.Int32()
	for ti := rng.IntN(4); ti > 0; ti-- {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = fmt.Sprintf("topic-%d", rng.IntN(1000))
		copy(t.TopicID[:], randBytes(rng, 16))
		for pi := rng.IntN(5); pi > 0; pi-- {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rng.Int32N(100)
			p.ErrorCode = int16(rng.IntN(4))
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = rng.Int64(), rng.Int64(), rng.Int64N(10)-1
			p.PreferredReadReplica = rng.Int32N(3) - 1
			switch rng.IntN(3) {
			case 0: // nil
			case 1:
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			default:
				for i := rng.IntN(3) + 1; i > 0; i-- {
					a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					a.ProducerID, a.FirstOffset = rng.Int64(), rng.Int64()
					if extras {
						a.UnknownTags = randTags(rng)
					}
					p.AbortedTransactions = append(p.AbortedTransactions, a)
				}
			}
			switch rng.IntN(4) {
			case 0: // nil
			case 1:
				p.RecordBatches = []byte{}
			default:
				p.RecordBatches = randBytes(rng, 1+rng.IntN(300))
			}
			if extras {
				if rng.IntN(3) == 0 {
					p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = rng.Int32(), rng.Int64()
				}
				if rng.IntN(3) == 0 {
					p.CurrentLeader.LeaderID = rng.Int32()
					p.CurrentLeader.UnknownTags = randTags(rng)
				}
				if rng.IntN(3) == 0 {
					p.SnapshotID.Epoch = rng.Int32()
				}
				p.UnknownTags = randTags(rng)
			}
			t.Partitions = append(t.Partitions, p)
		}
		if extras {
			t.UnknownTags = randTags(rng)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if extras {
		for i := rng.IntN(3); i > 0; i-- {
			b := kmsg.NewFetchResponseBroker()
			b.NodeID, b.Host, b.Port = rng.Int32(), fmt.Sprintf("h%d", rng.IntN(100)), rng.Int32()
			if rng.IntN(2) == 0 {
				r := "rack"
				b.Rack = &r
			}
			resp.Brokers = append(resp.Brokers, b)
		}
		resp.UnknownTags = randTags(rng)
	}
	return resp
}

// assemble splices the cuts' file bytes into buf.
func assemble(t testing.TB, buf []byte, cuts []fileCut) []byte {
	t.Helper()
	var out []byte
	prev := 0
	for _, c := range cuts {
		out = append(out, buf[prev:c.at]...)
		b := make([]byte, c.ref.Len)
		if _, err := c.ref.File.ReadAt(b, c.ref.Pos); err != nil {
			t.Fatalf("read cut: %v", err)
		}
		out = append(out, b...)
		prev = c.at
	}
	return append(out, buf[prev:]...)
}

// TestFetchEncodeMatchesKmsg: the piecewise encoder, with refs spliced back
// in, produces exactly kmsg's AppendTo, for every version, with and without
// refs, and for the fields kaas never sets.
func TestFetchEncodeMatchesKmsg(t *testing.T) {
	f, err := volume.OS().Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	maxV := kmsg.NewPtrFetchRequest().MaxVersion()
	for version := int16(0); version <= maxV; version++ {
		for i := 0; i < 400; i++ {
			extras := i%2 == 1
			resp := randFetchResponse(rng, version, extras)
			want := resp.AppendTo([]byte("prefix"))

			// Move some record sets to the file, as refs.
			var refs []partlog.Ref
			var fileEnd int64
			if st, err := f.Stat(); err == nil {
				fileEnd = st.Size()
			}
			useRefs := rng.IntN(4) != 0
			for ti := range resp.Topics {
				for pi := range resp.Topics[ti].Partitions {
					p := &resp.Topics[ti].Partitions[pi]
					if !useRefs || len(p.RecordBatches) == 0 || rng.IntN(3) == 0 {
						refs = append(refs, partlog.Ref{})
						continue
					}
					fileEnd += int64(rng.IntN(7)) // a gap before it
					if _, err := f.WriteAt(p.RecordBatches, fileEnd); err != nil {
						t.Fatal(err)
					}
					refs = append(refs, partlog.Ref{File: f, Pos: fileEnd, Len: len(p.RecordBatches)})
					fileEnd += int64(len(p.RecordBatches))
					p.RecordBatches = []byte{} // must be ignored
				}
			}
			if !useRefs {
				refs = nil
			}
			buf, cuts := appendFetchResponse([]byte("prefix"), resp, refs, nil)
			got := assemble(t, buf, cuts)
			if !bytes.Equal(got, want) {
				t.Fatalf("v%d case %d (extras %v): encoding differs from kmsg\n got %x\nwant %x", version, i, extras, got, want)
			}
		}
	}
}

func TestAppendSized(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 300, 20000} {
		got := appendSized([]byte{9}, func(d []byte) []byte { return append(d, make([]byte, n)...) })
		var want []byte
		want = append(want, 9)
		want = appendUvarint(want, uint32(n))
		want = append(want, make([]byte, n)...)
		if !bytes.Equal(got, want) {
			t.Fatalf("n=%d: got %x", n, got[:min(len(got), 8)])
		}
	}
}

func appendUvarint(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

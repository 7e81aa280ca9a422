package cluster

import (
	"errors"
	"path"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/faultfs"
	"github.com/kaas-dev/kaas/volume/memfs"
)

func TestHeartbeatRoundTrip(t *testing.T) {
	m := memfs.New()
	if hbs, err := ReadHeartbeats(m, clusterDir); err != nil || hbs != nil {
		t.Fatalf("no brokers dir: %v, %v; want nil, nil", hbs, err)
	}
	want := []Heartbeat{
		{BrokerID: 0, Counter: 3, KafkaAddr: "a:9092", AdminAddr: "a:8080", Zone: "eu-1a", Incarnation: "i0"},
		{BrokerID: 2, Counter: 1, KafkaAddr: "c:9092", Incarnation: "i2", Leaving: true},
		{BrokerID: 11, Counter: 9, KafkaAddr: "b:9092", Zone: "eu-1b", Incarnation: "i11"},
	}
	for _, hb := range want {
		if err := WriteHeartbeat(m, clusterDir, hb); err != nil {
			t.Fatal(err)
		}
	}
	// Durable: the heartbeat survives a crash right after the write.
	got, err := ReadHeartbeats(m.CrashClone(), clusterDir)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b Heartbeat) int { return int(a.BrokerID - b.BrokerID) })
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestReadHeartbeatsSkipsJunk(t *testing.T) {
	m := memfs.New()
	if err := WriteHeartbeat(m, clusterDir, Heartbeat{BrokerID: 1, Counter: 1, Incarnation: "x"}); err != nil {
		t.Fatal(err)
	}
	dir := path.Join(clusterDir, BrokersDir)
	junk := map[string]string{
		".1.json.tmp-0123456789abcdef": `{"brokerId":1,"counter":99,"incarnation":"x"}`, // a temp file
		"2.json":                       `{"brokerId":2,"coun`,                           // torn
		"3.json":                       ``,                                              // empty
		"4.json":                       `{"brokerId":5,"counter":1,"incarnation":"y"}`,  // ID differs from name
		"6.json":                       `{"brokerId":6,"counter":1}`,                    // no incarnation
		"notes.txt":                    `hello`,
		"x7.json":                      `{"brokerId":7,"counter":1,"incarnation":"z"}`,
	}
	for name, data := range junk {
		if err := volume.WriteFileAtomic(m, path.Join(dir, name), []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadHeartbeats(m, clusterDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].BrokerID != 1 || got[0].Counter != 1 {
		t.Fatalf("got %+v, want only broker 1 at counter 1", got)
	}
}

func TestReadHeartbeatsTransientErrors(t *testing.T) {
	setup := func(t *testing.T) *memfs.FS {
		m := memfs.New()
		for _, id := range []int32{1, 2} {
			if err := WriteHeartbeat(m, clusterDir, Heartbeat{BrokerID: id, Counter: 1, Incarnation: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	ids := func(hbs []Heartbeat) []int32 {
		var out []int32
		for _, h := range hbs {
			out = append(out, h.BrokerID)
		}
		return out
	}
	tests := []struct {
		name    string
		inj     faultfs.Injector
		want    []int32
		wantErr error
	}{
		{"ESTALE retried", faultfs.FailMatching(faultfs.OpOpen, "1.json", syscall.ESTALE, false, readAttempts-1), []int32{1, 2}, nil},
		{"ENOENT on a listed file retried", faultfs.FailMatching(faultfs.OpOpen, "2.json", syscall.ENOENT, false, readAttempts-1), []int32{1, 2}, nil},
		{"lasting ENOENT: gone, skipped", faultfs.FailMatching(faultfs.OpOpen, "2.json", syscall.ENOENT, false, 0), []int32{1}, nil},
		{"lasting ESTALE: skipped and reported", faultfs.FailMatching(faultfs.OpOpen, "1.json", syscall.ESTALE, false, 0), []int32{2}, syscall.ESTALE},
		{"EIO: skipped and reported", faultfs.FailMatching(faultfs.OpRead, "2.json", syscall.EIO, false, 1), []int32{1}, syscall.EIO},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := faultfs.New(setup(t), tc.inj)
			got, err := ReadHeartbeats(f, clusterDir)
			if !slices.Equal(ids(got), tc.want) {
				t.Fatalf("read brokers %v, want %v (err %v)", ids(got), tc.want, err)
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestHeartbeaterCountsAndSweepsOwnTemps(t *testing.T) {
	m := memfs.New()
	dir := path.Join(clusterDir, BrokersDir)
	if err := m.MkdirAll(dir, 0); err != nil {
		t.Fatal(err)
	}
	// Leftovers of crashed writes: one of broker 1's, one of broker 10's.
	for _, name := range []string{".1.json.tmp-00000000000000aa", ".10.json.tmp-00000000000000bb"} {
		f, err := m.Create(path.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	h := NewHeartbeater(m, clusterDir, Heartbeat{BrokerID: 1, KafkaAddr: "a:1", Incarnation: "i"})
	for range 3 {
		if err := h.Beat(); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Leave(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadHeartbeats(m, clusterDir)
	if err != nil || len(got) != 1 || got[0].Counter != 4 || !got[0].Leaving || !reflect.DeepEqual(got[0], h.Last()) {
		t.Fatalf("got %+v, %v; want counter 4, leaving", got, err)
	}
	ents, _ := m.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".10.json.tmp-00000000000000bb 1.json" {
		t.Fatalf("after sweep: %v; want broker 10's temp kept and broker 1's gone", names)
	}
}

func TestHeartbeaterFailedWriteStillAdvances(t *testing.T) {
	// A rename whose reply was lost: applied, reported failed. The next beat
	// must carry a higher counter, never the same one twice.
	f := faultfs.New(memfs.New(), faultfs.FailMatching(faultfs.OpRename, "1.json", syscall.EIO, true, 1))
	h := NewHeartbeater(f, clusterDir, Heartbeat{BrokerID: 1, Incarnation: "i"})
	if err := h.Beat(); err == nil {
		t.Fatal("lost rename reply not reported")
	}
	if err := h.Beat(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadHeartbeats(f, clusterDir)
	if err != nil || len(got) != 1 || got[0].Counter != 2 {
		t.Fatalf("got %+v, %v; want counter 2", got, err)
	}
}

func TestWriteHeartbeatValidates(t *testing.T) {
	m := memfs.New()
	for _, hb := range []Heartbeat{{BrokerID: -1, Incarnation: "i"}, {BrokerID: 1}} {
		if err := WriteHeartbeat(m, clusterDir, hb); err == nil {
			t.Fatalf("%+v accepted", hb)
		}
	}
}

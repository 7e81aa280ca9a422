package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// mountStatus is one mount in GET /status.
type mountStatus struct {
	Mount      int    `json:"mount"`
	Dir        string `json:"dir"`
	Host       string `json:"host"`
	DirtyBytes int64  `json:"dirty_bytes"`
	Faults     string `json:"faults"`
	// VolumeOps counts the volume.FS and File calls the mount made
	// (faultfs's count); MutatingOps those that can change the volume.
	VolumeOps   int `json:"volume_ops"`
	MutatingOps int `json:"mutating_ops"`
	// FuseOps counts the kernel's requests by kind.
	FuseOps map[string]uint64 `json:"fuse_ops"`
}

type status struct {
	Mounts []mountStatus `json:"mounts"`
	// Hidden lists the silly-renamed files (.nfsXXXX) of removed files
	// still open somewhere.
	Hidden []string `json:"hidden"`
}

func controlHandler(mounts []*mount, fl floor) http.Handler {
	mux := http.NewServeMux()
	pick := func(w http.ResponseWriter, r *http.Request) *mount {
		n, err := strconv.Atoi(r.URL.Query().Get("mount"))
		if err != nil || n < 1 || n > len(mounts) {
			http.Error(w, fmt.Sprintf("mount=%q: want a mount number from 1 to %d", r.URL.Query().Get("mount"), len(mounts)), http.StatusNotFound)
			return nil
		}
		return mounts[n-1]
	}

	mux.HandleFunc("POST /crash", func(w http.ResponseWriter, r *http.Request) {
		m := pick(w, r)
		if m == nil {
			return
		}
		m.host.view.Crash()
		fmt.Fprintf(w, "crashed %s\n", m.host.name)
	})

	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		m := pick(w, r)
		if m == nil {
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := m.setFaults(string(body)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "faults of %s: %q\n", m.host.name, body)
	})

	mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, r *http.Request) {
		m := pick(w, r)
		if m == nil {
			return
		}
		if err := m.setFaults(""); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "no faults on %s\n", m.host.name)
	})

	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		st := status{Mounts: []mountStatus{}, Hidden: []string{}}
		for _, m := range mounts {
			ms := mountStatus{
				Mount:       m.n,
				Dir:         m.dir,
				Host:        m.host.name,
				DirtyBytes:  m.host.view.DirtyBytes(),
				Faults:      m.faults(),
				VolumeOps:   m.ff.Ops(),
				MutatingOps: m.ff.MutatingOps(),
				FuseOps:     map[string]uint64{},
			}
			if m.srv != nil {
				ms.FuseOps = m.srv.OpCounts()
			}
			st.Mounts = append(st.Mounts, ms)
		}
		st.Hidden = append(st.Hidden, fl.srv.Hidden()...)
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
	})
	return mux
}

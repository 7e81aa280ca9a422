package main

import (
	"time"

	"github.com/kaas-dev/kaas/volume"
	"github.com/kaas-dev/kaas/volume/nfsfs"
)

// ttls are the NFS-client cache lifetimes of every view.
type ttls struct {
	attr, dir, neg time.Duration
}

// host is what one mount serves: one host's view of the shared backing.
type host struct {
	name  string
	view  volume.FS
	crash func()       // power-cuts the host; nil if the view cannot crash
	dirty func() int64 // bytes written but not yet flushed
}

// floor is the shared volume and its hosts.
type floor struct {
	hosts  []host
	hidden func() []string // silly-renamed files; nil if none are made
}

// newFloor builds n hosts over backing, each an NFS-like client view of one
// nfsfs server (close-to-open visibility, attribute caches, silly rename,
// unsynced writes lost on a power cut). This is the one place that decides
// what a host sees.
func newFloor(backing volume.FS, n int, t ttls) floor {
	srv := nfsfs.New(backing, nfsfs.Options{AttrTTL: t.attr, DirTTL: t.dir, NegTTL: t.neg})
	f := floor{hidden: srv.Hidden}
	for i := range n {
		v := srv.View(hostName(i))
		f.hosts = append(f.hosts, host{name: hostName(i), view: v, crash: v.Crash, dirty: v.DirtyBytes})
	}
	return f
}

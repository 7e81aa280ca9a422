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
	name string
	view *nfsfs.View
}

// floor is the shared volume and its hosts.
type floor struct {
	srv   *nfsfs.Server
	hosts []host
}

// newFloor builds n hosts over backing, each an NFS-like client view of one
// nfsfs server (close-to-open visibility, attribute caches, silly rename,
// unsynced writes lost on a power cut). This is the one place that decides
// what a host sees.
func newFloor(backing volume.FS, n int, t ttls) floor {
	srv := nfsfs.New(backing, nfsfs.Options{AttrTTL: t.attr, DirTTL: t.dir, NegTTL: t.neg})
	f := floor{srv: srv}
	for i := range n {
		f.hosts = append(f.hosts, host{name: hostName(i), view: srv.View(hostName(i))})
	}
	return f
}

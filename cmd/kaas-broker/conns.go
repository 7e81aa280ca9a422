package main

import (
	"flag"

	"github.com/kaas-dev/kaas/wire"
)

// connOptions are the flags of the client-facing limits: connections
// (Kafka's max.connections, max.connections.per.ip) and the size of a
// Fetch answer (fetch.max.bytes), and the broker-wide produce rate guard.
type connOptions struct {
	maxConnections, maxConnectionsPerIP, fetchMaxBytes int
	maxProduceBytesPerSecond                           int64
}

func (c *connOptions) register(fs *flag.FlagSet) {
	fs.IntVar(&c.maxConnections, "max-connections", 0,
		"client connections open at once; one more is closed as soon as it is accepted (max.connections; KAAS_MAX_CONNECTIONS; 0: derived from the fd limit)")
	fs.IntVar(&c.maxConnectionsPerIP, "max-connections-per-ip", 0,
		"client connections open at once from one IP address (max.connections.per.ip; KAAS_MAX_CONNECTIONS_PER_IP; 0: unlimited)")
	fs.IntVar(&c.fetchMaxBytes, "fetch-max-bytes", wire.DefaultFetchMaxBytes,
		"records in one Fetch answer at most, whatever the request asks; the first batch is answered whole even if larger (fetch.max.bytes; KAAS_FETCH_MAX_BYTES)")
	fs.Int64Var(&c.maxProduceBytesPerSecond, "max-produce-bytes-per-second", 0,
		"produce bytes per second the broker takes from all clients together; over it, produce responses are throttled as by a client quota (KAAS_MAX_PRODUCE_BYTES_PER_SECOND; 0: off)")
}

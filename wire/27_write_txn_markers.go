package wire

// WriteTxnMarkers: versions 0-1.
//
// Behavior:
// * Sent by a transaction coordinator to the owner of each partition of
//   an ending transaction: the owner appends a commit or abort control
//   batch for the producer and answers once it is durable. A producer with
//   no open transaction at the partition gets no marker (a new
//   coordinator re-sends the markers its predecessor may have written).
// * Topic __consumer_offsets names coordinator shards: partition i
//   completes the producer's transactional offset commits in shard i.
// * A marker whose producer epoch is older than the partition's (a newer
//   epoch wrote since) is superseded and answered without error.
// * Only brokers send it: once this broker authenticates clients, a
//   principal that is not a broker's (nor a super user) gets
//   CLUSTER_AUTHORIZATION_FAILED on every partition and nothing is written
//   (interbroker.go; the response has no message field).
//
// Version notes:
// * v1: flexible

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleWriteTxnMarkers(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	c.async(r, func() {
		// Every marker concurrently, so their fsyncs overlap.
		var wg sync.WaitGroup
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
				for i, p := range t.Partitions {
					rp := &rt.Partitions[i]
					*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition = p
					wg.Add(1)
					go func() {
						defer wg.Done()
						err := c.s.eng.WriteLocalMarker(c.ctx, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, t.Topic, p)
						rp.ErrorCode = errorCode(err)
					}()
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		wg.Wait()
		r.finish(resp)
	})
}

package wire

import "github.com/twmb/franz-go/pkg/kmsg"

// fetchKey names one requested partition: by topic ID from Fetch v13, by
// topic name before.
type fetchKey struct {
	topic     string
	id        [16]byte
	partition int32
}

func keyOf(version int16, rt *kmsg.FetchRequestTopic, partition int32) fetchKey {
	if version >= 13 {
		return fetchKey{id: rt.TopicID, partition: partition}
	}
	return fetchKey{topic: rt.Topic, partition: partition}
}

// smallFetch is the number of partitions up to which duplicates are looked
// for without allocating.
const smallFetch = 32

// collapseDuplicates returns req with each partition named once, as Kafka
// answers: it reads a request into a map keyed by partition, so a repeated
// partition keeps its first place and takes its last entry's position
// (fetch offset, limits). Without this, one small request naming a
// partition 200 times was answered 200 times over. A request without
// duplicates (all clients send) is returned as it is, without allocating
// when it names up to smallFetch partitions.
func collapseDuplicates(req *kmsg.FetchRequest) *kmsg.FetchRequest {
	if !hasDuplicates(req) {
		return req
	}
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	out := *req
	out.Topics = make([]kmsg.FetchRequestTopic, len(req.Topics))
	at := make(map[fetchKey][2]int, n) // topic and partition index in out
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		out.Topics[ti] = *rt
		out.Topics[ti].Partitions = make([]kmsg.FetchRequestTopicPartition, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			k := keyOf(req.Version, rt, rp.Partition)
			if where, dup := at[k]; dup {
				out.Topics[where[0]].Partitions[where[1]] = rp
				continue
			}
			at[k] = [2]int{ti, len(out.Topics[ti].Partitions)}
			out.Topics[ti].Partitions = append(out.Topics[ti].Partitions, rp)
		}
	}
	// Drop the topic entries that named only partitions already named.
	kept := out.Topics[:0]
	for ti, ot := range out.Topics {
		if len(ot.Partitions) > 0 || len(req.Topics[ti].Partitions) == 0 {
			kept = append(kept, ot)
		}
	}
	out.Topics = kept
	return &out
}

// hasDuplicates reports whether req names a partition more than once.
func hasDuplicates(req *kmsg.FetchRequest) bool {
	var small [smallFetch]fetchKey
	n := 0
	var seen map[fetchKey]struct{}
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		for _, rp := range rt.Partitions {
			k := keyOf(req.Version, rt, rp.Partition)
			if seen == nil && n < smallFetch {
				for i := range n {
					if small[i] == k {
						return true
					}
				}
				small[n] = k
				n++
				continue
			}
			if seen == nil {
				seen = make(map[fetchKey]struct{}, 2*smallFetch)
				for i := range n {
					seen[small[i]] = struct{}{}
				}
			}
			if _, dup := seen[k]; dup {
				return true
			}
			seen[k] = struct{}{}
		}
	}
	return false
}

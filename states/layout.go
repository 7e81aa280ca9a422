package states

import (
	"path"
	"strconv"

	"github.com/kaas-dev/kaas/volume"
)

// The layout of the data volume (docs/volume.md has the whole tree):
//
//	<data>/topics/<topic>/.topic-id.json   the stamp naming the incarnation
//	<data>/topics/<topic>/<partition>/     one partition log (volume/partlog)
//	<data>/trash/<topic>~<topicID>/        a deleted incarnation, being removed
//
// Topics live one level down so that no topic name (Kafka allows "__cluster"
// and ".trash") can collide with kaas's own directories.
const (
	TopicsDir = "topics"
	TrashDir  = "trash"
	StampFile = ".topic-id.json"
)

// TopicDir is the directory of a topic's partitions.
func TopicDir(dataDir, topic string) string { return path.Join(dataDir, TopicsDir, topic) }

// PartitionDir is the directory of one partition log.
func PartitionDir(dataDir, topic string, partition int32) string {
	return path.Join(TopicDir(dataDir, topic), strconv.Itoa(int(partition)))
}

// StampPath is the topic-ID stamp of a topic directory.
func StampPath(dataDir, topic string) string { return path.Join(TopicDir(dataDir, topic), StampFile) }

// TrashPath is where a deleted incarnation is moved aside:
// trash/<topic>~<topicID>. The topic ID in the name keeps two incarnations
// of one name apart. A topic name too long for that to fit NAME_MAX (from
// 219 characters, with a 36-character ID) is shortened by volume.FitName:
// trash/<topic cut short>~<hash of the topic>~<topicID>, which still ends
// in the ID; the full topic is in the entry's stamp and in its machine's
// record.
func TrashPath(dataDir, topic, topicID string) string {
	return path.Join(dataDir, TrashDir, volume.FitName(topic, "~"+topicID))
}

// PartitionObject names a partition in records and status.
func PartitionObject(topic string, partition int32) string {
	return topic + "/" + strconv.Itoa(int(partition))
}

// GroupsDir holds the group-coordinator shards' logs (engine/groups).
const GroupsDir = "groups"

// ShardDir is the directory of one coordinator shard's log, under the
// cluster directory: <cluster>/groups/<shard>/.
func ShardDir(clusterDir string, shard int32) string {
	return path.Join(clusterDir, GroupsDir, strconv.Itoa(int(shard)))
}

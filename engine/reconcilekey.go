package engine

// Kind is what a reconcile key names: the dispatch table (reconcilers.go)
// holds one reconciler per kind.
type Kind string

const (
	// KindTopic reconciles one topic: its partitions, its delete, the
	// reclaim of a stale directory.
	KindTopic Kind = "topic"
	// KindGroups reconciles the coordinator shards of the groups store.
	KindGroups Kind = "groups"
	// KindTrash sweeps the trash of reclaimed directories.
	KindTrash Kind = "trash"
)

// Key is one item of the reconcile queue.
type Key struct {
	Kind Kind
	// Name is the object of the kind (a topic name); empty for the
	// singleton kinds.
	Name string
}

// String is the key as logs and the reconcile status name it:
// "topic/<name>", or the kind alone for a singleton.
func (k Key) String() string {
	if k.Name == "" {
		return string(k.Kind)
	}
	return string(k.Kind) + "/" + k.Name
}

func topicKey(name string) Key { return Key{Kind: KindTopic, Name: name} }

var (
	groupsKey = Key{Kind: KindGroups}
	trashKey  = Key{Kind: KindTrash}
)

package partlog

// Option changes how an opened Log behaves beyond its Config. The options
// are negative controls: they deliberately break a guarantee, for the
// fault-model scenarios that prove the checks catch it. None is ever used
// in production.
type Option func(*options)

type options struct {
	skipFenceRecheck bool
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// UnsafeSkipFenceRecheck drops the fence check of each sync round, so a
// writer fenced by a new owner keeps acknowledging: the zombie's acks a
// chaos checker must catch.
func UnsafeSkipFenceRecheck() Option {
	return func(o *options) { o.skipFenceRecheck = true }
}

package engine

import (
	"sync/atomic"
	"time"
)

// testClock is a clock that moves only when a test advances it.
type testClock struct{ elapsed atomic.Int64 }

var testEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestClock() *testClock { return &testClock{} }

func (c *testClock) Now() time.Time { return testEpoch.Add(time.Duration(c.elapsed.Load())) }

func (c *testClock) Advance(d time.Duration) { c.elapsed.Add(int64(d)) }

package cluster

import "github.com/kaas-dev/kaas/volume/crashtest"

// The sweeps run on every crashtest substrate.
type (
	world     = crashtest.World
	substrate = crashtest.Substrate
)

func substrates() []substrate { return crashtest.Substrates() }

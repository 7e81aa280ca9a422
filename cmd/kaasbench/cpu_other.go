//go:build !linux

package main

import "time"

// CPU time is only read on Linux.
func processCPU() (time.Duration, bool)   { return 0, false }
func brokerCPU(int) (time.Duration, bool) { return 0, false }

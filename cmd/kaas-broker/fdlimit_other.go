//go:build !unix

package main

import "errors"

// raiseFDLimit is not supported here: the budget then uses the fallback.
func raiseFDLimit() (before, after uint64, err error) {
	return 0, 0, errors.New("RLIMIT_NOFILE is not available on this platform")
}

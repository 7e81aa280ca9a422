// Package envdefault gives the kaas commands' flags their defaults from the
// environment (KAAS_*), so a container sets them with env vars and a flag
// on the command line still wins.
package envdefault

import (
	"os"
	"strconv"
	"time"
)

// String is the value of key, or def when key is unset.
func String(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

// Int is key parsed as an integer, or def when key is unset or not one.
func Int(key string, def int) int {
	if v, ok := os.LookupEnv(key); ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// Duration is key parsed by time.ParseDuration, or def when key is unset
// or not one.
func Duration(key string, def time.Duration) time.Duration {
	if v, ok := os.LookupEnv(key); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

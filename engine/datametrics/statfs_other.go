//go:build !linux && !darwin

package datametrics

import "errors"

func osStatfs(string) (Space, error) {
	return Space{}, errors.New("statfs is not supported on this platform")
}

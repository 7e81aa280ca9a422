//go:build !linux

package volume

import "fmt"

// Space implements Spacer; kaas reads a volume's size on Linux only.
func (osFS) Space(dir string) (Space, error) {
	return Space{}, fmt.Errorf("size of %s: %w", dir, ErrSpaceUnknown)
}

//go:build linux || darwin

package datametrics

import "golang.org/x/sys/unix"

// osStatfs reads statfs(2): Free is what an unprivileged writer may use.
func osStatfs(dir string) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Space{}, err
	}
	bs := uint64(st.Bsize)
	return Space{Size: st.Blocks * bs, Free: st.Bavail * bs}, nil
}

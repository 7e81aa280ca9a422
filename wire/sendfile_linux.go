//go:build linux

package wire

import (
	"errors"
	"io"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kaas-dev/kaas/volume"
)

const sendfileSupported = true

// sendFile sends [pos, pos+n) of f (whose descriptor fder gives) to the
// socket of rc with sendfile(2), waiting for writability on EAGAIN through
// the runtime poller (so the connection's write deadline applies). It
// returns the bytes sent. The caller guarantees f stays open (a live
// partlog.Ref); f is kept reachable until the call ends so no finalizer can
// close the descriptor under it.
func sendFile(rc syscall.RawConn, f volume.File, fder volume.Fder, pos int64, n int) (int, error) {
	defer runtime.KeepAlive(f)
	src := fder.Fd()
	if src == ^uintptr(0) {
		return 0, os.ErrClosed
	}
	sent := 0
	var serr error
	err := rc.Write(func(sock uintptr) bool {
		for sent < n {
			m, err := unix.Sendfile(int(sock), int(src), &pos, min(n-sent, 1<<30))
			switch {
			case err == nil && m > 0:
				sent += m
			case err == unix.EINTR:
			case err == unix.EAGAIN:
				return false // wait until writable, then call again
			case err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP:
				serr = errors.Join(errSendfileUnsupported, os.NewSyscallError("sendfile", err))
				return true
			case err != nil:
				serr = os.NewSyscallError("sendfile", err)
				return true
			default: // 0 bytes: the file ends before the range does
				serr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	})
	if err != nil {
		return sent, err
	}
	return sent, serr
}

// setCork sets or clears TCP_CORK: while set, the kernel sends only full
// segments; clearing it sends what is queued.
func setCork(rc syscall.RawConn, on bool) error {
	v := 0
	if on {
		v = 1
	}
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, v)
	})
	if err != nil {
		return err
	}
	return serr
}

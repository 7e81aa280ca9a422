//go:build !linux

package wire

import (
	"errors"
	"syscall"

	"github.com/kaas-dev/kaas/volume"
)

// Only Linux sends file ranges with sendfile; elsewhere they are copied.
const sendfileSupported = false

func sendFile(syscall.RawConn, volume.File, volume.Fder, int64, int) (int, error) {
	return 0, errSendfileUnsupported
}

func setCork(syscall.RawConn, bool) error { return errors.ErrUnsupported }

package command

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// openNoSymlinks opens path read-only without following a symbolic link in
// any of its components (openat2 with RESOLVE_NO_SYMLINKS). The error is a
// bare errno (no path in it); errNoOpenat2 when the kernel lacks openat2.
func openNoSymlinks(path string) (int, error) {
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
		switch {
		case errors.Is(err, syscall.EINTR), errors.Is(err, syscall.EAGAIN):
			continue
		case errors.Is(err, syscall.ENOSYS):
			return -1, errNoOpenat2
		}
		return fd, err
	}
}

//go:build !linux

package loop

// Only gnet on Linux exposes its epoll instance (gnet_pause_linux.go).
func (r *reactor) lingerAfterAnswer() {}

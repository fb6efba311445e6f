package server

import (
	"os"
	"os/signal"
	"syscall"
)

// handleSignals maps nats-server's signals: INT/TERM stop, USR1 reopens the log, USR2 enters
// lame duck mode, HUP reloads the config file.
func (s *Server) handleSignals() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP)
	go func() {
		defer signal.Stop(c)
		for {
			select {
			case <-s.shutdown:
				return
			case sig := <-c:
				// Once, at INFO, for every signal, as nats-server logs it.
				s.log.Noticef("Trapped %q signal", sig)
				switch sig {
				case syscall.SIGINT, syscall.SIGTERM:
					go s.Shutdown()
					return
				case syscall.SIGUSR1:
					if err := s.log.Reopen(); err != nil {
						s.log.Errorf("Failed to reopen log file: %v", err)
					} else {
						s.log.Noticef("File log re-opened")
					}
				case syscall.SIGUSR2:
					go s.LameDuck()
				case syscall.SIGHUP:
					if err := s.Reload(); err != nil {
						s.log.Errorf("Failed to reload server configuration: %s", err)
					}
				}
			}
		}
	}()
}

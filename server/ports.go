package server

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// The ports file (ports_file_dir, --ports_file_dir): once listening, the server writes
// <dir>/<executable>_<pid>.ports, a JSON object with the URLs of its listeners, and removes it
// at shutdown. Test launchers (nats.js's among them) find a server started on random ports
// this way. Names and layout are nats-server's.

// Ports are the URLs a server can be reached at, by listener.
type Ports struct {
	Nats       []string `json:"nats,omitempty"`
	Monitoring []string `json:"monitoring,omitempty"`
	Cluster    []string `json:"cluster,omitempty"`
	Profile    []string `json:"profile,omitempty"`
	WebSocket  []string `json:"websocket,omitempty"`
}

// portsFile is where the ports file goes ("" without ports_file_dir).
func portsFile(dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, fmt.Sprintf("%s_%d.ports", filepath.Base(os.Args[0]), os.Getpid()))
}

// PortsInfo lists the bound listeners' URLs.
func (s *Server) PortsInfo() *Ports {
	o := s.getOpts()
	var p Ports
	if a := s.eng.Addr(); a != nil {
		scheme := "nats"
		if req, _, _ := tlsInfo(o); req {
			scheme = "tls"
		}
		p.Nats = listenerURLs(scheme, a)
	}
	if a := s.MonitorAddr(); a != nil {
		scheme := "http"
		if o.HTTPSPort != 0 {
			scheme = "https"
		}
		p.Monitoring = listenerURLs(scheme, a)
	}
	if a := s.ProfilerAddr(); a != nil {
		p.Profile = listenerURLs("http", a)
	}
	return &p
}

// listenerURLs is scheme://host:port for a listener; one bound to every address lists each
// address of each interface.
func listenerURLs(scheme string, a *net.TCPAddr) []string {
	port := strconv.Itoa(a.Port)
	var hosts []string
	if a.IP.IsUnspecified() {
		ifaces, _ := net.Interfaces()
		for _, i := range ifaces {
			addrs, _ := i.Addrs()
			for _, addr := range addrs {
				switch v := addr.(type) {
				case *net.IPNet:
					hosts = append(hosts, v.IP.String())
				case *net.IPAddr:
					hosts = append(hosts, v.IP.String())
				}
			}
		}
	} else {
		hosts = append(hosts, a.IP.String())
	}
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, scheme+"://"+net.JoinHostPort(h, port))
	}
	return out
}

// writePortsFile writes the ports file when ports_file_dir is set.
func (s *Server) writePortsFile() {
	f := portsFile(s.getOpts().PortsFileDir)
	if f == "" {
		return
	}
	b, err := json.Marshal(s.PortsInfo())
	if err == nil {
		err = os.WriteFile(f, b, 0o666)
	}
	if err != nil {
		s.log.Errorf("Error writing ports file (%s): %v", f, err)
	}
}

func (s *Server) removePortsFile() {
	if f := portsFile(s.getOpts().PortsFileDir); f != "" {
		if err := os.Remove(f); err != nil {
			s.log.Errorf("Error cleaning up ports file %s: %v", f, err)
		}
	}
}

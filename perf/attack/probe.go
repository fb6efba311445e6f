package attack

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The unrelated client runs in a process of its own: inside the rig's process its goroutine
// would wait behind the attacker's (which write as fast as the server reads, so the faster
// the server, the longer the probe waits for a CPU), and its round trips would measure the
// rig's scheduler as much as the server. ProbeMain is that process's entry point: a program
// that runs Run calls it first (attackrig's main, this package's TestMain).

const probeEnv = "NATSD_ATTACK_PROBE" // "addr" or "addr tls"

// ProbeMain runs the probe and exits when this process was started as one; otherwise it
// returns at once.
func ProbeMain() {
	spec := os.Getenv(probeEnv)
	if spec == "" {
		return
	}
	f := strings.Fields(spec)
	d := &dialer{addr: f[0]}
	if len(f) > 1 && f[1] == "tls" {
		d.tls = &tls.Config{InsecureSkipVerify: true}
	}
	p, err := d.client()
	if err != nil {
		fmt.Printf("err %v\n", err)
		os.Exit(0)
	}
	fmt.Println("ready")
	// Commands on stdin, one per line: "rtts NANOS" measures for that long and answers with
	// the round trips in nanoseconds (and "err ..." once the connection failed).
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var ns int64
		if _, err := fmt.Sscanf(sc.Text(), "rtts %d", &ns); err != nil {
			continue
		}
		out := p.rtts(time.Duration(ns), nil)
		var b strings.Builder
		b.WriteString("rtts")
		for _, r := range out {
			b.WriteByte(' ')
			b.WriteString(strconv.FormatInt(int64(r), 10))
		}
		fmt.Println(b.String())
		if p.err != nil {
			fmt.Printf("err %v\n", p.err)
		}
	}
	p.close()
	os.Exit(0)
}

// probeProc is the parent's handle on a probe process.
type probeProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	err error
}

func startProbe(d *dialer) (*probeProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec := d.addr
	if d.tls != nil {
		spec += " tls"
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), probeEnv+"="+spec)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &probeProc{cmd: cmd, in: in, out: bufio.NewScanner(stdout)}
	p.out.Buffer(make([]byte, 1<<20), 64<<20)
	if !p.out.Scan() || p.out.Text() != "ready" {
		line := p.out.Text()
		p.close()
		return nil, fmt.Errorf("probe process: %q", line)
	}
	return p, nil
}

// rtts has the probe measure for d and returns its round trips.
func (p *probeProc) rtts(d time.Duration) []time.Duration {
	if _, err := fmt.Fprintf(p.in, "rtts %d\n", int64(d)); err != nil {
		p.err = err
		return nil
	}
	var out []time.Duration
	for p.out.Scan() {
		line := p.out.Text()
		if rest, ok := strings.CutPrefix(line, "err "); ok {
			p.err = fmt.Errorf("%s", rest)
			continue
		}
		if f, ok := strings.CutPrefix(line, "rtts"); ok {
			for _, s := range strings.Fields(f) {
				if v, err := strconv.ParseInt(s, 10, 64); err == nil {
					out = append(out, time.Duration(v))
				}
			}
			return out
		}
	}
	if p.err == nil {
		p.err = fmt.Errorf("probe process ended")
	}
	return out
}

func (p *probeProc) close() {
	_ = p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

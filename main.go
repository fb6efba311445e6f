// Command natsd is a drop-in replacement for nats-server: same flags, same protocol.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/natsd/natsd/server"
)

const usage = `
Usage: natsd [options]

Server Options:
    -a, --addr, --net <host>         Bind to host address (default: 0.0.0.0)
    -p, --port <port>                Use port for clients (default: 4222)
    -n, --name
        --server_name <server_name>  Server name (default: auto)
    -P, --pid <file>                 File to store PID
    -m, --http_port <port>           Use port for http monitoring (-1: random port)
    -ms,--https_port <port>          Use port for https monitoring (not supported yet)
    -c, --config <file>              Configuration file (not supported yet)
    -sl,--signal <signal>[=<pid>]    Send signal to natsd process (ldm, stop, quit, term, reopen, reload)
                                     <pid> can be either a PID (e.g. 1) or the path to a PID file
        --reactors <n>               Number of event-loop reactors (default: 1, measured best on 2 cores)
        --reuseport                  One SO_REUSEPORT listener per reactor
        --lame_duck_duration <dur>   Spread lame-duck closes over this long (default: 2m)
        --lame_duck_grace_period <d> Wait this long before the first close (default: 10s)

Profiling Options:
        --profile <port>             Profiling HTTP port (Go pprof at /debug/pprof)

Logging Options:
    -l, --log <file>                 File to redirect log output
    -T, --logtime                    Timestamp log entries (default: true)
    -D, --debug                      Enable debugging output
    -V, --trace                      Trace the raw protocol
    -DV                              Debug and trace

Common Options:
    -h, --help                       Show this message
    -v, --version                    Show version
`

func printUsage() { fmt.Fprint(os.Stderr, usage) }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	opts, cmd, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage()
			return 0
		}
		fmt.Fprintf(os.Stderr, "natsd: %v\n", err)
		printUsage()
		return 1
	}
	switch cmd.action {
	case "version":
		fmt.Printf("natsd: v%s (nats-server v%s compatible)\n", server.Version, server.ServerVersion)
		return 0
	case "help":
		printUsage()
		return 0
	case "signal":
		if err := sendSignal(cmd.signal); err != nil {
			fmt.Fprintf(os.Stderr, "natsd: %v\n", err)
			return 1
		}
		return 0
	}
	s, err := server.New(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "natsd: %v\n", err)
		return 1
	}
	for _, w := range cmd.unsupported {
		s.Logger().Warnf("%s is not supported yet, ignored", w)
	}
	stopProfiles, err := startProfiles()
	if err != nil {
		fmt.Fprintf(os.Stderr, "natsd: %v\n", err)
		return 1
	}
	defer stopProfiles()
	if err := s.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "natsd: %v\n", err)
		return 1
	}
	s.WaitForShutdown()
	return 0
}

// startProfiles honours NATSD_CPUPROFILE and NATSD_MEMPROFILE (paths): a CPU profile of the
// whole run and an allocation profile written at exit, for the perf rig.
func startProfiles() (stop func(), err error) {
	var cpu *os.File
	if p := os.Getenv("NATSD_CPUPROFILE"); p != "" {
		if cpu, err = os.Create(p); err != nil {
			return nil, err
		}
		if err = pprof.StartCPUProfile(cpu); err != nil {
			return nil, err
		}
	}
	memPath := os.Getenv("NATSD_MEMPROFILE")
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			cpu.Close()
		}
		if memPath != "" {
			if f, err := os.Create(memPath); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}
	}, nil
}

type command struct {
	action      string // "", "version", "help", "signal"
	signal      string
	unsupported []string
}

// parseFlags reads nats-server's flags (Go flag syntax: -x and --x alike, aliases share a field).
func parseFlags(args []string) (*server.Options, *command, error) {
	o := &server.Options{Logtime: true}
	cmd := &command{}
	fs := flag.NewFlagSet("natsd", flag.ContinueOnError)
	fs.Usage = func() {}
	fs.SetOutput(discard{})

	var showVersion, showHelp, dv, dvv, vv bool
	var httpsPort int
	var config, signal, user, pass, auth, storeDir, cluster, routes string
	var js bool
	for _, n := range []string{"a", "addr", "net"} {
		fs.StringVar(&o.Host, n, server.DefaultHost, "")
	}
	for _, n := range []string{"p", "port"} {
		fs.IntVar(&o.Port, n, server.DefaultPort, "")
	}
	for _, n := range []string{"n", "name", "server_name"} {
		fs.StringVar(&o.ServerName, n, "", "")
	}
	for _, n := range []string{"P", "pid"} {
		fs.StringVar(&o.PidFile, n, "", "")
	}
	for _, n := range []string{"m", "http_port"} {
		fs.IntVar(&o.HTTPPort, n, 0, "")
	}
	for _, n := range []string{"ms", "https_port"} {
		fs.IntVar(&httpsPort, n, 0, "")
	}
	fs.IntVar(&o.ProfPort, "profile", 0, "")
	for _, n := range []string{"c", "config"} {
		fs.StringVar(&config, n, "", "")
	}
	for _, n := range []string{"sl", "signal"} {
		fs.StringVar(&signal, n, "", "")
	}
	for _, n := range []string{"l", "log"} {
		fs.StringVar(&o.LogFile, n, "", "")
	}
	for _, n := range []string{"T", "logtime"} {
		fs.BoolVar(&o.Logtime, n, true, "")
	}
	for _, n := range []string{"D", "debug"} {
		fs.BoolVar(&o.Debug, n, false, "")
	}
	for _, n := range []string{"V", "trace"} {
		fs.BoolVar(&o.Trace, n, false, "")
	}
	fs.BoolVar(&dv, "DV", false, "")
	fs.BoolVar(&dvv, "DVV", false, "")
	fs.BoolVar(&vv, "VV", false, "")
	for _, n := range []string{"v", "version"} {
		fs.BoolVar(&showVersion, n, false, "")
	}
	for _, n := range []string{"h", "help"} {
		fs.BoolVar(&showHelp, n, false, "")
	}
	fs.StringVar(&user, "user", "", "")
	fs.StringVar(&pass, "pass", "", "")
	fs.StringVar(&auth, "auth", "", "")
	for _, n := range []string{"js", "jetstream"} {
		fs.BoolVar(&js, n, false, "")
	}
	for _, n := range []string{"sd", "store_dir"} {
		fs.StringVar(&storeDir, n, "", "")
	}
	for _, n := range []string{"cluster", "cluster_listen"} {
		fs.StringVar(&cluster, n, "", "")
	}
	fs.StringVar(&routes, "routes", "", "")
	fs.IntVar(&o.Reactors, "reactors", 0, "")
	fs.DurationVar(&o.LameDuckDuration, "lame_duck_duration", 0, "")
	fs.DurationVar(&o.LameDuckGracePeriod, "lame_duck_grace_period", 0, "")
	fs.BoolVar(&o.ReusePort, "reuseport", false, "")

	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	for _, a := range fs.Args() {
		switch strings.ToLower(a) {
		case "version":
			showVersion = true
		case "help":
			showHelp = true
		default:
			return nil, nil, fmt.Errorf("unrecognized command: %q", a)
		}
	}
	if dv || dvv {
		o.Debug, o.Trace = true, true
	}
	if vv {
		o.Trace = true
	}
	switch {
	case showVersion:
		cmd.action = "version"
	case showHelp:
		cmd.action = "help"
	case signal != "":
		cmd.action, cmd.signal = "signal", signal
	}
	if user != "" || pass != "" || auth != "" {
		// Starting open when the operator asked for credentials would be a security hole.
		return nil, nil, errors.New("authentication (--user/--pass/--auth) is not supported yet")
	}
	if config != "" {
		return nil, nil, errors.New("configuration files (-c) are not supported yet")
	}
	if httpsPort != 0 {
		cmd.unsupported = append(cmd.unsupported, "HTTPS monitoring (-ms/--https_port, needs TLS)")
	}
	if js || storeDir != "" {
		cmd.unsupported = append(cmd.unsupported, "JetStream (-js/--store_dir)")
	}
	if cluster != "" || routes != "" {
		cmd.unsupported = append(cmd.unsupported, "clustering (--cluster/--routes)")
	}
	return o, cmd, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// sendSignal implements -sl/--signal cmd[=pid|pidfile].
func sendSignal(arg string) error {
	name, target, _ := strings.Cut(arg, "=")
	sigs := map[string]syscall.Signal{
		"stop": syscall.SIGKILL, "quit": syscall.SIGINT, "term": syscall.SIGTERM,
		"reopen": syscall.SIGUSR1, "reload": syscall.SIGHUP, "ldm": syscall.SIGUSR2,
	}
	sig, ok := sigs[strings.ToLower(name)]
	if !ok {
		return fmt.Errorf("unknown signal %q", name)
	}
	if target == "" {
		return errors.New("no pid given: use --signal " + name + "=<pid|pidfile>")
	}
	pid, err := strconv.Atoi(target)
	if err != nil {
		b, rerr := os.ReadFile(target)
		if rerr != nil {
			return fmt.Errorf("invalid pid or pid file %q", target)
		}
		if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return fmt.Errorf("invalid pid in %q", target)
		}
	}
	return syscall.Kill(pid, sig)
}

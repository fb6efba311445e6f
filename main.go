// Command natsd is a drop-in replacement for nats-server: same flags, same protocol.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/natsd/natsd/cluster"
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
        --ports_file_dir <dir>       Creates a ports file in the specified directory (<executable_name>_<pid>.ports).
    -m, --http_port <port>           Use port for http monitoring (-1: random port)
        --client_advertise <string>  Client URL to advertise to other servers
    -ms,--https_port <port>          Use port for https monitoring (not supported by natsd yet:
                                     refused unless --allow_unsupported)
    -c, --config <file>              Configuration file
    -t                               Test configuration and exit
    -sl,--signal <signal>[=<pid>]    Send signal to natsd process (ldm, stop, quit, term, reopen, reload)
                                     <pid> can be either a PID (e.g. 1) or the path to a PID file
                                     (e.g. /var/run/natsd.pid); without it, the one running natsd
        --reactors <n>               Number of event-loop reactors (default: 1, measured best on 2 cores)
        --reuseport                  One SO_REUSEPORT listener per reactor
        --reply_spin <dur>           Poll this long for the next request after answering one
                                     on the reactor, instead of sleeping (default: 200us; 0: never)
        --lame_duck_duration <dur>   Spread lame-duck closes over this long (default: 2m)
        --lame_duck_grace_period <d> Wait this long before the first close (default: 10s)
        --allow_unsupported          Start even if the config file or the flags hold settings
                                     natsd does not implement yet: they are ignored, with a
                                     warning (also the config key allow_unsupported: true)

Profiling Options:
        --profile <port>             Profiling HTTP port (Go pprof at /debug/pprof)

Logging Options:
    -l, --log <file>                 File to redirect log output
    -T, --logtime                    Timestamp log entries (default: true)
    -s, --syslog                     Log to syslog or windows event log
    -r, --remote_syslog <addr>       Syslog server addr (udp://localhost:514)
        --log_size_limit <limit>     Logfile size limit (default: auto)
        --logtime_utc                Timestamps in UTC instead of local timezone (default: false)
    -D, --debug                      Enable debugging output
    -V, --trace                      Trace the raw protocol
    -VV                              Verbose trace (natsd traces as with -V)
    -DV                              Debug and trace
    -DVV                             Debug and verbose trace (natsd: as -DV)
        --max_traced_msg_len <len>   Maximum printable length for traced messages (default: unlimited)

JetStream Options:
    -js, --jetstream                 Enable JetStream functionality
    -sd, --store_dir <dir>           Set the storage directory

Authorization Options:
        --user <user>                User required for connections
        --pass <password>            Password required for connections
        --auth <token>               Authorization token required for connections

Cluster Options:
        --routes <rurl-1, rurl-2>    Routes to solicit and connect
        --cluster <cluster-url>      Cluster URL for solicited routes
        --cluster_listen <url>       Cluster URL for solicited routes
        --cluster_name <string>      Cluster Name, if not set one will be dynamically generated
        --no_advertise <bool>        Do not advertise known cluster information to clients
        --cluster_advertise <string> Cluster URL to advertise to other servers
        --connect_retries <number>   For implicit routes, number of connect retries

TLS Options:
        --tls                        Enable TLS, do not verify clients (default: false)
        --tlscert <file>             Server certificate file
        --tlskey <file>              Private key for server certificate
        --tlsverify                  Enable TLS, verify client certificates
        --tlscacert <file>           Client certificate CA for verification

Common Options:
    -h, --help                       Show this message
    -v, --version                    Show version
        --help_tls                   TLS help
`

// printUsage prints the usage text on stdout, as nats-server does (for -h and a bad flag).
func printUsage() { fmt.Print(usage + "\n") }

// flagError is a command-line flag that does not parse. nats-server's flag set reports it
// (on stderr), prints the usage and exits 0; any other error is just "natsd: <error>", exit 1.
type flagError struct{ err error }

func (e flagError) Error() string { return e.err.Error() }
func (e flagError) Unwrap() error { return e.err }

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
		if fe, ok := err.(flagError); ok {
			fmt.Fprintln(os.Stderr, fe.err)
			printUsage()
			return 0
		}
		fmt.Fprintf(os.Stderr, "natsd: %v\n", err)
		return 1
	}
	switch cmd.action {
	case "version":
		// First exactly nats-server's line: client libraries' CI and test launchers read the
		// server version from it (nats.c's skips its JetStream tests when it does not parse);
		// natsd's own version follows on a line of its own.
		fmt.Printf("nats-server: v%s\n%s\n", server.ServerVersion, server.OwnVersion())
		return 0
	case "help":
		printUsage()
		return 0
	case "help_tls":
		fmt.Print(server.TLSHelp())
		return 0
	case "signal":
		if err := sendSignal(cmd.signal); err != nil {
			fmt.Fprintf(os.Stderr, "natsd: %v\n", err)
			return 1
		}
		return 0
	}
	// Settings natsd does not implement stop -t and start-up, each named, unless the operator
	// opted in; then they are ignored with a warning.
	if err := server.CheckUnsupported(opts); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(os.Stderr, "natsd: %s\n", line)
		}
		return 1
	}
	if cmd.action == "check" {
		for _, w := range server.UnsupportedWarnings(opts) {
			fmt.Fprintf(os.Stderr, "natsd: %s\n", w)
		}
		fmt.Fprintf(os.Stderr, "natsd: configuration file %s is valid (%s)\n", opts.ConfigFile, cmd.digest)
		return 0
	}
	s, err := server.New(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "natsd: %v\n", err)
		return 1
	}
	if cmd.reapply != nil {
		s.SetFlagOverrides(cmd.reapply)
	}
	for _, w := range cmd.warnings {
		s.Logger().Warnf("%v", w)
	}
	for _, w := range server.UnsupportedWarnings(opts) {
		s.Logger().Warnf("%s", w)
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
	action   string // "", "version", "help", "help_tls", "signal", "check"
	signal   string
	warnings []error // located config warnings, logged at start-up
	digest   string  // config digest, for -t
	// reapply re-applies the command-line flags onto options loaded from the config file
	// (flags win), at start-up and on every reload.
	reapply func(*server.Options) error
}

// flagVals holds the flags that do not map straight onto an Options field.
type flagVals struct {
	showVersion, showHelp, showTLSHelp bool
	dv, dvv, vv, check                 bool
	config, signal, cluster, routes    string
	tls, tlsVerify                     bool
	tlsCert, tlsKey, tlsCaCert         string
}

// defineFlags binds nats-server's flags to o and x. Each flag's default is o's current value,
// so parsing the same arguments again over options loaded from a config file changes only
// what the command line gives (flags win, as in nats-server).
func defineFlags(fs *flag.FlagSet, o *server.Options, x *flagVals) {
	str := func(p *string, names ...string) {
		for _, n := range names {
			fs.StringVar(p, n, *p, "")
		}
	}
	num := func(p *int, names ...string) {
		for _, n := range names {
			fs.IntVar(p, n, *p, "")
		}
	}
	boolean := func(p *bool, names ...string) {
		for _, n := range names {
			fs.BoolVar(p, n, *p, "")
		}
	}
	str(&o.Host, "a", "addr", "net")
	num(&o.Port, "p", "port")
	str(&o.ServerName, "n", "name", "server_name")
	str(&o.PidFile, "P", "pid")
	str(&o.PortsFileDir, "ports_file_dir")
	str(&o.ClientAdvertise, "client_advertise")
	num(&o.HTTPPort, "m", "http_port")
	num(&o.HTTPSPort, "ms", "https_port")
	num(&o.ProfPort, "profile")
	str(&x.config, "c", "config")
	boolean(&x.check, "t")
	str(&x.signal, "sl", "signal")
	str(&o.LogFile, "l", "log")
	boolean(&o.Logtime, "T", "logtime")
	boolean(&o.LogtimeUTC, "logtime_utc")
	num(&o.MaxTracedMsgLen, "max_traced_msg_len")
	boolean(&o.Syslog, "s", "syslog")
	fs.Int64Var(&o.LogSizeLimit, "log_size_limit", o.LogSizeLimit, "")
	str(&o.RemoteSyslog, "r", "remote_syslog")
	boolean(&o.Debug, "D", "debug")
	boolean(&o.Trace, "V", "trace")
	boolean(&x.dv, "DV")
	boolean(&x.dvv, "DVV")
	boolean(&x.vv, "VV")
	boolean(&x.showVersion, "v", "version")
	boolean(&x.showHelp, "h", "help")
	boolean(&x.showTLSHelp, "help_tls")
	boolean(&o.AllowUnsupported, "allow_unsupported")
	str(&o.Username, "user")
	str(&o.Password, "pass")
	str(&o.Authorization, "auth")
	boolean(&x.tls, "tls")
	str(&x.tlsCert, "tlscert")
	str(&x.tlsKey, "tlskey")
	boolean(&x.tlsVerify, "tlsverify")
	str(&x.tlsCaCert, "tlscacert")
	// -js / -sd go straight to the options, as in nats-server: set before the file is read
	// (so -sd and a store_dir in the file are a duplicate, as there) and again after it.
	boolean(&o.JetStream, "js", "jetstream")
	str(&o.StoreDir, "sd", "store_dir")
	str(&x.cluster, "cluster", "cluster_listen")
	str(&x.routes, "routes")
	str(&o.Cluster.Name, "cluster_name")
	str(&o.Cluster.Advertise, "cluster_advertise")
	boolean(&o.Cluster.NoAdvertise, "no_advertise")
	num(&o.Cluster.ConnectRetries, "connect_retries")
	num(&o.Reactors, "reactors")
	fs.Var(server.ReplySpinFlag{D: &o.ReplySpin}, "reply_spin", "")
	fs.DurationVar(&o.LameDuckDuration, "lame_duck_duration", o.LameDuckDuration, "")
	fs.DurationVar(&o.LameDuckGracePeriod, "lame_duck_grace_period", o.LameDuckGracePeriod, "")
	boolean(&o.ReusePort, "reuseport")
	str(&o.Engine, "engine")
}

func newFlagSet(o *server.Options, x *flagVals) *flag.FlagSet {
	fs := flag.NewFlagSet("natsd", flag.ContinueOnError)
	fs.Usage = func() {}
	fs.SetOutput(discard{})
	defineFlags(fs, o, x)
	return fs
}

// applySpecialFlags does what nats-server does after parsing: -DV/-DVV/-VV set debug and
// trace, any --tls* flag builds the TLS config from the flags (--tls=false turns TLS off
// even if the config file sets it up), --cluster replaces the file's route listener and
// credentials, and --routes its routes.
func applySpecialFlags(fs *flag.FlagSet, o *server.Options, x *flagVals) error {
	var tlsOverride, tlsDisabled, clusterSet, routesSet, httpsSet bool
	var flagErr error
	fs.Visit(func(f *flag.Flag) {
		if flagErr != nil {
			return
		}
		switch f.Name {
		case "cluster", "cluster_listen":
			clusterSet = true
			flagErr = overrideCluster(o, x.cluster)
		case "routes":
			routesSet = true
			if x.routes == "" {
				o.Cluster.Routes = nil
				return
			}
			o.Cluster.Routes, flagErr = cluster.RoutesFromStr(x.routes)
		case "DV", "DVV":
			o.Debug, o.Trace = x.dv || x.dvv, x.dv || x.dvv
		case "VV":
			o.Trace = x.vv
		case "tls":
			if !x.tls {
				o.TLSConfig, o.TLSVerify = nil, false
				tlsDisabled, tlsOverride = true, false
				return
			}
			tlsOverride = true
		case "tlscert", "tlskey", "tlsverify", "tlscacert":
			if !tlsDisabled {
				tlsOverride = true
			}
		case "ms", "https_port":
			httpsSet = true
		}
	})
	// HTTPS monitoring is not built: the flag is a setting natsd does not implement, refused
	// at start-up (and -t) unless the operator opts in, as the config file's keys are.
	// The flag replaces the file's https/https_port: only the flag is reported, and -ms 0
	// leaves nothing to refuse.
	if httpsSet {
		o.Unsupported = slices.DeleteFunc(slices.Clone(o.Unsupported), func(u server.UnsupportedSetting) bool {
			return !u.Flag && (u.Key == "https" || u.Key == "https_port")
		})
		if o.HTTPSPort != 0 {
			o.Unsupported = append(o.Unsupported, server.UnsupportedSetting{Key: "-ms/--https_port", Flag: true, What: "HTTPS monitoring"})
		}
	}
	if flagErr != nil {
		return flagErr
	}
	// Routes from the command line need a route listener, from --cluster or the file.
	if routesSet && x.routes != "" && (!clusterSet || x.cluster == "") && o.Cluster.Host == "" && o.Cluster.Port == 0 {
		return errors.New("solicited routes require cluster capabilities, e.g. --cluster")
	}
	if !tlsOverride {
		return nil
	}
	if x.tlsCert == "" {
		return errors.New("TLS Server certificate must be present and valid")
	}
	if x.tlsKey == "" {
		return errors.New("TLS Server private key must be present and valid")
	}
	tc, err := server.GenTLSConfig(&server.TLSFiles{
		CertFile: x.tlsCert, KeyFile: x.tlsKey, CaFile: x.tlsCaCert, Verify: x.tlsVerify,
		Ciphers: server.DefaultTLSCiphers(),
	})
	if err != nil {
		return err
	}
	o.TLSConfig, o.TLSVerify = tc, x.tlsVerify
	return nil
}

// parseFlags reads nats-server's flags (Go flag syntax: -x and --x alike, aliases share a
// field), then the config file (-c), then the flags again so that they win.
func parseFlags(args []string) (*server.Options, *command, error) {
	o := &server.Options{Logtime: true, Host: server.DefaultHost, Port: server.DefaultPort}
	cmd := &command{}
	x := &flagVals{}
	fs := newFlagSet(o, x)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, err
		}
		return nil, nil, flagError{err}
	}
	for _, a := range fs.Args() {
		switch strings.ToLower(a) {
		case "version":
			x.showVersion = true
		case "help":
			x.showHelp = true
		default:
			return nil, nil, fmt.Errorf("unrecognized command: %q", a)
		}
	}
	switch {
	case x.showVersion:
		cmd.action = "version"
		return o, cmd, nil
	case x.showHelp:
		cmd.action = "help"
		return o, cmd, nil
	case x.showTLSHelp:
		cmd.action = "help_tls"
		return o, cmd, nil
	case x.signal != "":
		cmd.action, cmd.signal = "signal", x.signal
		return o, cmd, nil
	}
	if x.config != "" {
		rep, err := o.ProcessConfigFile(x.config)
		if err != nil {
			return nil, nil, err
		}
		if x.check && len(rep.Warnings) > 0 {
			return nil, nil, server.ConfigErrors(rep.Warnings)
		}
		cmd.warnings, cmd.digest = rep.Warnings, rep.Digest
		// Flags win over the file.
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		cmd.reapply = func(n *server.Options) error {
			nx := &flagVals{}
			nfs := newFlagSet(n, nx)
			if err := nfs.Parse(args); err != nil {
				return err
			}
			return applySpecialFlags(nfs, n, nx)
		}
	} else if x.check {
		return nil, nil, errors.New("must specify [-c, --config] option to check configuration file syntax")
	}
	if err := applySpecialFlags(fs, o, x); err != nil {
		return nil, nil, err
	}
	if x.check {
		cmd.action = "check"
	}
	return o, cmd, nil
}

// overrideCluster is --cluster / --cluster_listen (nats-server's overrideCluster): a URL
// nats://[user:pass@]host:port whose host and port replace the file's listener (":-1" picks
// a random port) and whose credentials replace the file's cluster authorization (none given:
// none kept); an empty value turns clustering off.
func overrideCluster(o *server.Options, listen string) error {
	c := &o.Cluster
	if listen == "" {
		c.Port = 0
		return nil
	}
	// url.Parse refuses a negative port: parse ":0" and put the -1 back.
	random := strings.HasSuffix(listen, ":-1")
	if random {
		listen = listen[:len(listen)-3] + ":0"
	}
	u, err := url.Parse(listen)
	if err != nil {
		return err
	}
	h, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		return err
	}
	if random {
		p = "-1"
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return fmt.Errorf("invalid cluster port %q in %q", p, listen)
	}
	c.Host, c.Port = h, port
	if u.User == nil {
		c.Username, c.Password = "", ""
		return nil
	}
	pass, ok := u.User.Password()
	if !ok {
		return errors.New("expected cluster password to be set")
	}
	c.Username, c.Password = u.User.Username(), pass
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// sendSignal implements -sl/--signal cmd[=pid|pid*|pidfile] as nats-server does: without a
// pid it signals the one running server found by pgrep (by this executable's name, so an
// install named nats-server finds nats-server), refusing when there are several; "pid*"
// signals every running server whose pid starts so.
func sendSignal(arg string) error {
	parts := strings.Split(arg, "=")
	if len(parts) > 2 {
		return fmt.Errorf("invalid signal parameters: %v", parts[2:])
	}
	name, target := parts[0], ""
	if len(parts) == 2 {
		target = parts[1]
		if b, err := os.ReadFile(target); err == nil {
			target = strings.TrimSpace(string(b))
		}
	}
	sigs := map[string]syscall.Signal{
		"stop": syscall.SIGKILL, "quit": syscall.SIGINT, "term": syscall.SIGTERM,
		"reopen": syscall.SIGUSR1, "reload": syscall.SIGHUP, "ldm": syscall.SIGUSR2,
	}
	pidStr, glob := strings.TrimSuffix(target, "*"), strings.HasSuffix(target, "*")
	if pidStr != "" && !glob {
		pid, err := strconv.Atoi(pidStr)
		if err != nil {
			return fmt.Errorf("invalid pid: %s", pidStr)
		}
		sig, ok := sigs[strings.ToLower(name)]
		if !ok {
			return fmt.Errorf("unknown signal %q", name)
		}
		return syscall.Kill(pid, sig)
	}
	if _, err := strconv.Atoi(pidStr); pidStr != "" && err != nil {
		return fmt.Errorf("invalid pid: %s", pidStr)
	}
	proc := filepath.Base(os.Args[0])
	pids, err := runningPids(proc)
	if err != nil {
		return err
	}
	if len(pids) > 1 && !glob {
		msg := fmt.Sprintf("multiple %s processes running:", proc)
		for _, p := range pids {
			msg += "\n" + strconv.Itoa(p)
		}
		return errors.New(msg)
	}
	if len(pids) == 0 {
		return fmt.Errorf("no %s processes running", proc)
	}
	sig, ok := sigs[strings.ToLower(name)]
	if !ok {
		return fmt.Errorf("unknown signal %q", name)
	}
	var msg string
	for _, pid := range pids {
		if !strings.HasPrefix(strconv.Itoa(pid), pidStr) {
			continue
		}
		if err := syscall.Kill(pid, sig); err != nil {
			msg += fmt.Sprintf("\nsignal %q %d: %s", name, pid, err)
		}
	}
	if msg != "" {
		return errors.New(msg)
	}
	return nil
}

// runningPids lists the pids pgrep finds for name, this process left out; no pgrep on the
// machine means the operator must give the pid.
func runningPids(name string) ([]int, error) {
	out, err := exec.Command("pgrep", name).Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return nil, errors.New("unable to resolve pid, try providing one")
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, errors.New("unable to resolve pid, try providing one")
		}
		if pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

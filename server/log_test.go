package server

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLogRotation: past logfile_size_limit the log file is moved aside under nats-server's
// backup name and a new one starts with a line naming the backup; logfile_max_num keeps that
// many files in all, the oldest backups removed.
func TestLogRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "natsd.log")
	l, err := newLogger(&Options{LogFile: path, Logtime: true, LogSizeLimit: 300, LogMaxFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	for i := 0; i < 40; i++ {
		l.Noticef("line %d with some padding to fill the file", i)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	backup := regexp.MustCompile(`^natsd\.log\.\d{4}\.\d{2}\.\d{2}\.\d{2}\.\d{2}\.\d{2}\.\d{9}$`)
	var backups int
	for _, e := range entries {
		switch {
		case e.Name() == "natsd.log":
		case backup.MatchString(e.Name()):
			backups++
		default:
			t.Errorf("unexpected file %s", e.Name())
		}
	}
	if backups != 2 {
		t.Fatalf("%d backups, want 2 (logfile_max_num 3 in all)", backups)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	if !strings.Contains(first, "[INF] Rotated log, backup saved as \""+path+".") {
		t.Fatalf("first line of the new file: %q", first)
	}
	if len(b) > 2*300 {
		t.Fatalf("current file past its limit (%d bytes):\n%s", len(b), b)
	}
}

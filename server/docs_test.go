package server

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsLinks: the README and docs/ link only to files inside the repository that exist (a
// clone has nothing beside it, such as the project's working notes).
func TestDocsLinks(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(root, "README.md")}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, docs...)
	if len(docs) < 3 {
		t.Fatalf("docs/ has %d files, want ARCHITECTURE.md, CONFIG.md and MIGRATING.md", len(docs))
	}
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		if strings.Contains(string(b), "../shared") {
			t.Errorf("%s points into ../shared, which a clone does not have", rel)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p := filepath.Clean(filepath.Join(filepath.Dir(f), target))
			if !strings.HasPrefix(p, root+string(filepath.Separator)) {
				t.Errorf("%s links to %s, outside the repository", rel, target)
				continue
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s links to %s, which does not exist", rel, target)
			}
		}
	}
}

package tq_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Which file says how libtq is linked, by platform and build tag: the
// bundled static library only on linux/amd64 (the one the published module
// carries), pkg-config under tq_system and everywhere else, the source
// tree's library under tq_intree. Both cgo packages follow the same rule.
func TestLinkFileByPlatformAndTag(t *testing.T) {
	cases := []struct{ goos, goarch, tags, want string }{
		{"linux", "amd64", "", "link_bundled.go"},
		{"linux", "amd64", "tq_system", "link_system.go"},
		{"linux", "amd64", "tq_intree", "link_intree.go"},
		{"linux", "arm64", "", "link_system.go"},
		{"darwin", "arm64", "", "link_system.go"},
		{"darwin", "arm64", "tq_intree", "link_intree.go"},
	}
	for _, c := range cases {
		cmd := exec.Command("go", "list", "-tags="+c.tags, "-f", "{{.ImportPath}}{{range .CgoFiles}} {{.}}{{end}}", ".", "./internal/cbench")
		// Cross-compiling turns cgo off unless it is asked for.
		cmd.Env = append(os.Environ(), "GOOS="+c.goos, "GOARCH="+c.goarch, "CGO_ENABLED=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list for %s/%s -tags=%q: %v\n%s", c.goos, c.goarch, c.tags, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			var links []string
			for _, file := range fields[1:] {
				if strings.HasPrefix(file, "link_") {
					links = append(links, file)
				}
			}
			if len(links) != 1 || links[0] != c.want {
				t.Errorf("%s/%s -tags=%q: %s links through %v, want [%s]", c.goos, c.goarch, c.tags, fields[0], links, c.want)
			}
		}
	}
}

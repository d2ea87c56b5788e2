// Command gomodproxy writes one version of a Go module, from a directory
// that holds it, as a module proxy serves it: a GOPROXY=file:// tree with
// <escaped module path>/@v/list, v<version>.info, .mod and .zip.
//
//	gomodproxy -dir STAGE -version v0.3.0 -time 2026-01-02T03:04:05Z -out PROXYDIR
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func main() {
	dir := flag.String("dir", "", "the directory holding the module, go.mod at its root")
	version := flag.String("version", "", "the module's version, such as v0.3.0")
	stamp := flag.String("time", "", "the version's time (RFC 3339), which .info reports")
	out := flag.String("out", "", "the proxy's root directory")
	flag.Parse()
	if *dir == "" || *version == "" || *stamp == "" || *out == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*dir, *version, *stamp, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gomodproxy:", err)
		os.Exit(1)
	}
}

func run(dir, version, stamp, out string) error {
	when, err := time.Parse(time.RFC3339, stamp)
	if err != nil {
		return fmt.Errorf("-time: %w", err)
	}
	goMod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	path := modfile.ModulePath(goMod)
	if path == "" {
		return fmt.Errorf("%s/go.mod names no module", dir)
	}
	mod := module.Version{Path: path, Version: version}
	if err := module.Check(path, version); err != nil {
		return err
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	versionDir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(versionDir, 0o755); err != nil {
		return err
	}
	escapedVersion, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	base := filepath.Join(versionDir, escapedVersion)

	zipFile, err := os.Create(base + ".zip")
	if err != nil {
		return err
	}
	// CreateFromDir applies the go command's rules: it leaves out what a
	// module zip may not hold and fails on what it must not.
	if err := zip.CreateFromDir(zipFile, mod, dir); err != nil {
		zipFile.Close()
		return err
	}
	if err := zipFile.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(base+".mod", goMod, 0o644); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, when.UTC()})
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".info", info, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(versionDir, "list"), []byte(version+"\n"), 0o644)
}

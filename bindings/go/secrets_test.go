package tq

import (
	"strings"
	"testing"
)

// No message shows the password of a PostgreSQL URL: not the refusal of a
// path with a NUL byte, not a server's refusal.
func TestMessagesNeverShowAPassword(t *testing.T) {
	for _, path := range []string{
		"postgres://alice:s3cret@127.0.0.1:1/db\x00x",
		"postgres://alice:s3cret@127.0.0.1:1/db",
	} {
		_, err := Open(path)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", path)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q): the error shows the password: %v", path, err)
		}
		if !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("Open(%q): the error does not name the server: %v", path, err)
		}
	}
}

func TestRedactedLocation(t *testing.T) {
	for location, want := range map[string]string{
		"postgres://alice:s3cret@127.0.0.1:1/db":          "postgres://alice@127.0.0.1:1/db",
		"postgres://alice@h/db?password=s3cret&sslmode=a": "postgres://alice@h/db?sslmode=a",
		"/var/lib/app/jobs.db":                            "/var/lib/app/jobs.db",
	} {
		if got := redactedLocation(location); got != want {
			t.Errorf("redactedLocation(%q) = %q, want %q", location, got, want)
		}
	}
}

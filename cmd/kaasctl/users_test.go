package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
)

// TestUsers: users set writes a credential PLAIN and SCRAM can check with
// no broker running; list shows users and mechanisms and never a key;
// delete removes them.
func TestUsers(t *testing.T) {
	data := t.TempDir()
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kaasctl := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(append(args, "--data", data), &out)
		return out.String(), err
	}
	if _, err := kaasctl("users", "set", "alice", "--password-file", pw); err != nil {
		t.Fatal(err)
	}
	if _, err := kaasctl("users", "set", "alice", "--password-file", pw, "--mechanism", "SCRAM-SHA-256", "--iterations", "8192"); err != nil {
		t.Fatal(err)
	}
	lookup := auth.StoreLookup(volume.OS(), filepath.Join(data, "__cluster"))
	if user, err := auth.Plain([]byte("\x00alice\x00s3cret"), lookup); err != nil || user != "alice" {
		t.Fatalf("PLAIN with the password from the file: %q, %v", user, err)
	}
	out, err := kaasctl("users", "list", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []userRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 ||
		rows[0] != (userRow{"alice", "SCRAM-SHA-256", 8192}) || rows[1] != (userRow{"alice", "SCRAM-SHA-512", 4096}) {
		t.Fatalf("users list: %s (%v)", out, err)
	}
	if strings.Contains(out, "storedKey") || strings.Contains(out, "salt") {
		t.Fatalf("users list shows key material: %s", out)
	}
	for _, bad := range [][]string{
		{"users", "set", "bob"},
		{"users", "set", "bob", "--password-file", pw, "--iterations", "100"},
		{"users", "set", "bob", "--password-file", pw, "--mechanism", "MD5"},
		{"users", "delete", "bob"},
	} {
		if _, err := kaasctl(bad...); err == nil {
			t.Errorf("kaasctl %v succeeded", bad)
		}
	}
	if out, err := kaasctl("users", "delete", "alice"); err != nil || strings.Count(out, "deleted") != 2 {
		t.Fatalf("users delete: %q, %v", out, err)
	}
	if _, err := auth.Plain([]byte("\x00alice\x00s3cret"), lookup); err == nil {
		t.Fatal("a deleted user still logs in")
	}
}

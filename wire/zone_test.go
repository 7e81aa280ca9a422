package wire

import "testing"

func TestClientZone(t *testing.T) {
	for _, tc := range []struct{ clientID, want string }{
		{"", ""},
		{"rdkafka", ""},
		{"kaas_az=us-east-1a", "us-east-1a"},
		{"orders,kaas_az=z1", "z1"},
		{"orders kaas_az=z1 v2", "z1"},
		{"orders;kaas_az=z1;x", "z1"},
		{"kaas_az=z1,kaas_az=z2", "z1"},
		{"xkaas_az=z1", ""},
		{"xkaas_az=z1,kaas_az=z2", "z2"},
		{"kaas_az=", ""},
		{"app-kaas_az=z1", ""},
	} {
		if got := clientZone(tc.clientID); got != tc.want {
			t.Errorf("clientZone(%q) = %q, want %q", tc.clientID, got, tc.want)
		}
	}
}

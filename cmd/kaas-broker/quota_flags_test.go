package main

import "testing"

func TestMaxProduceBytesPerSecond(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		args    []string
		want    int64
		wantErr bool
	}{
		{name: "off by default"},
		{name: "flag", args: []string{"--max-produce-bytes-per-second", "1048576"}, want: 1 << 20},
		{name: "environment", env: "2048", want: 2048},
		{name: "flag wins", env: "2048", args: []string{"--max-produce-bytes-per-second", "4096"}, want: 4096},
		{name: "negative refused", args: []string{"--max-produce-bytes-per-second", "-1"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("KAAS_MAX_PRODUCE_BYTES_PER_SECOND", tt.env)
			}
			o, err := parseFlags(tt.args)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("%v accepted", tt.args)
				}
				return
			}
			if err != nil || o.conns.maxProduceBytesPerSecond != tt.want {
				t.Fatalf("max produce bytes/s %v, %v; want %d", o.conns.maxProduceBytesPerSecond, err, tt.want)
			}
		})
	}
}

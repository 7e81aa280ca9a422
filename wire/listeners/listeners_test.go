package listeners

import (
	"errors"
	"reflect"
	"testing"
)

// TestParse: Kafka's listener forms, and the configurations Kafka refuses.
func TestParse(t *testing.T) {
	good := []struct {
		name                      string
		listeners, pm, advertised string
		want                      []Listener
	}{
		{"one plaintext", "PLAINTEXT://127.0.0.1:9092", "", "",
			[]Listener{{"PLAINTEXT", Plaintext, "127.0.0.1:9092", ""}}},
		{"every protocol", "sasl_ssl://127.0.0.1:9093,SSL://127.0.0.1:9094,SASL_PLAINTEXT://127.0.0.1:9095,PLAINTEXT://127.0.0.1:9092", "", "",
			[]Listener{{"SASL_SSL", SASLSSL, "127.0.0.1:9093", ""}, {"SSL", SSL, "127.0.0.1:9094", ""},
				{"SASL_PLAINTEXT", SASLPlaintext, "127.0.0.1:9095", ""}, {"PLAINTEXT", Plaintext, "127.0.0.1:9092", ""}}},
		{"custom names, all interfaces, advertised", "CLIENT://:9092,REPLICATION://0.0.0.0:9091", "CLIENT:SASL_SSL,REPLICATION:SSL",
			"CLIENT://kaas-0.kaas:9092,REPLICATION://10.0.0.5:9091",
			[]Listener{{"CLIENT", SASLSSL, ":9092", "kaas-0.kaas:9092"}, {"REPLICATION", SSL, "0.0.0.0:9091", "10.0.0.5:9091"}}},
		{"IPv6", "PLAINTEXT://[::1]:9092", "", "",
			[]Listener{{"PLAINTEXT", Plaintext, "[::1]:9092", ""}}},
		{"all interfaces, not advertised", "PLAINTEXT://:9092", "", "",
			[]Listener{{"PLAINTEXT", Plaintext, ":9092", ""}}},
	}
	for _, c := range good {
		got, err := Parse(c.listeners, c.pm, c.advertised)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	bad := []struct{ name, listeners, pm, advertised string }{
		{"none", "", "", ""},
		{"no scheme", "127.0.0.1:9092", "", ""},
		{"unknown protocol", "CLIENT://127.0.0.1:9092", "", ""},
		{"bad map protocol", "CLIENT://127.0.0.1:9092", "CLIENT:TLS", ""},
		{"name twice", "PLAINTEXT://127.0.0.1:9092,plaintext://127.0.0.1:9093", "", ""},
		{"port twice", "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.2:9092", "", ""},
		{"bad port", "PLAINTEXT://127.0.0.1:99999", "", ""},
		{"advertised unknown name", "PLAINTEXT://127.0.0.1:9092", "", "SSL://h:9093"},
		{"advertises 0.0.0.0", "PLAINTEXT://:9092", "", "PLAINTEXT://0.0.0.0:9092"},
		{"map names twice", "A://h:1", "A:SSL,a:SASL_SSL", ""},
	}
	for _, c := range bad {
		if got, err := Parse(c.listeners, c.pm, c.advertised); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %+v, %v; want ErrInvalid", c.name, got, err)
		}
	}
	if !SASLSSL.TLS() || !SASLSSL.SASL() || Plaintext.TLS() || SSL.SASL() || !SASLPlaintext.SASL() {
		t.Error("protocol properties")
	}
}

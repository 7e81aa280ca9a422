package quota

import (
	"math"
	"strings"
	"testing"

	"github.com/kaas-dev/kaas/engine/versioned"
)

func str(s string) *string { return &s }

func TestEntityOf(t *testing.T) {
	tests := []struct {
		name  string
		comps []Component
		want  Entity
		err   string
	}{
		{"user", []Component{{TypeUser, str("alice")}}, Entity{User: Named("alice")}, ""},
		{"default user", []Component{{TypeUser, nil}}, Entity{User: DefaultPart()}, ""},
		{"client", []Component{{TypeClientID, str("")}}, Entity{ClientID: Named("")}, ""},
		{"both", []Component{{TypeClientID, nil}, {TypeUser, str("a")}}, Entity{Named("a"), DefaultPart()}, ""},
		{"empty", nil, Entity{}, "empty"},
		{"twice", []Component{{TypeUser, str("a")}, {TypeUser, str("b")}}, Entity{}, "more than once"},
		{"unknown", []Component{{"group", str("a")}}, Entity{}, "unknown"},
		{"empty type", []Component{{"", str("a")}}, Entity{}, "empty entity type"},
		{"ip", []Component{{TypeIP, str("1.2.3.4")}}, Entity{}, "not supported"},
		{"user+ip", []Component{{TypeUser, str("a")}, {TypeIP, nil}}, Entity{}, "combination"},
	}
	for _, tt := range tests {
		got, err := EntityOf(tt.comps)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want one with %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: got %+v %v, want %+v", tt.name, got, err, tt.want)
		}
	}
}

func TestKeyAndValue(t *testing.T) {
	tests := []struct {
		key   string
		value float64
		ok    bool
	}{
		{"producer_byte_rate", 1024, true},
		{"consumer_byte_rate", 1, true},
		{"request_percentage", 0.5, true},
		{"request_percentage", 250, true},
		{"producer_byte_rate", 0, false},
		{"producer_byte_rate", -5, false},
		{"producer_byte_rate", 1.5, false},
		{"consumer_byte_rate", math.Inf(1), false},
		{"request_percentage", 0, false},
		{"request_percentage", math.NaN(), false},
		{"controller_mutation_rate", 1, false},
		{"connection_creation_rate", 1, false},
		{"bogus", 1, false},
	}
	for _, tt := range tests {
		k, err := ParseKey(tt.key)
		if err == nil {
			err = ValidateValue(k, tt.value)
		}
		if (err == nil) != tt.ok {
			t.Errorf("%s=%v: error %v, want ok %v", tt.key, tt.value, err, tt.ok)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	quotas := []Quota{
		{Entity{User: Named("alice")}, ProducerByteRate, 1024},
		{Entity{User: DefaultPart(), ClientID: Named("app")}, RequestPercentage, 12.5},
		{Entity{ClientID: DefaultPart()}, ConsumerByteRate, 1},
		{Entity{User: Named(""), ClientID: Named("")}, ConsumerByteRate, 7},
	}
	names := map[string]bool{}
	for _, q := range quotas {
		en := versioned.Entry{Name: FileName(q.Entity, q.Key), Data: Encode(q)}
		names[en.Name] = true
		got, err := Decode(en)
		if err != nil || got != q {
			t.Errorf("%s: decoded %+v %v", en.Name, got, err)
		}
	}
	if len(names) != len(quotas) {
		t.Errorf("file names collide: %v", names)
	}
	if FileName(Entity{User: Named("a")}, ProducerByteRate) == FileName(Entity{ClientID: Named("a")}, ProducerByteRate) {
		t.Error("a user and a client-id of one name share a file")
	}
	if FileName(Entity{User: DefaultPart()}, ProducerByteRate) == FileName(Entity{User: Named("")}, ProducerByteRate) {
		t.Error("the default user and the empty user share a file")
	}
	bad := []versioned.Entry{
		{Name: "x.json", Data: []byte("{")},
		{Name: "x.json", Data: Encode(quotas[0])},
		{Name: FileName(quotas[0].Entity, quotas[0].Key), Data: []byte(`{"entity":[{"type":"user","name":"alice"}],"key":"producer_byte_rate","value":-1}`)},
		{Name: "y.json", Data: []byte(`{"entity":[{"type":"ip","name":"1.1.1.1"}],"key":"connection_creation_rate","value":1}`)},
	}
	got, errs := DecodeAll(bad)
	if len(got) != 0 || len(errs) != len(bad) {
		t.Errorf("DecodeAll of bad entries: %v %v", got, errs)
	}
}

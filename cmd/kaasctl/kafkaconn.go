package main

import (
	"flag"
	"os"

	"github.com/kaas-dev/kaas/cmd/internal/kafkaadmin"
)

// kafkaFlags say how acls and quotas reach a cluster's Kafka listener.
type kafkaFlags struct{ conn kafkaadmin.Conn }

func (k *kafkaFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.conn.Bootstrap, "bootstrap", os.Getenv("KAAS_BOOTSTRAP"), "Kafka listener(s) of the cluster, HOST:PORT[,HOST:PORT] (KAAS_BOOTSTRAP)")
	fs.BoolVar(&k.conn.TLS, "tls", os.Getenv("KAAS_TLS") == "true", "the listener speaks TLS (KAAS_TLS=true; implied by --tls-ca-file)")
	fs.StringVar(&k.conn.CAFile, "tls-ca-file", os.Getenv("KAAS_TLS_CA_FILE"), "PEM CAs the listener's certificate is verified against (KAAS_TLS_CA_FILE; default the system's)")
	fs.StringVar(&k.conn.SASLMechanism, "sasl-mechanism", os.Getenv("KAAS_SASL_MECHANISM"), "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (KAAS_SASL_MECHANISM; default no SASL)")
	fs.StringVar(&k.conn.SASLUser, "sasl-username", os.Getenv("KAAS_SASL_USERNAME"), "SASL user (KAAS_SASL_USERNAME)")
	fs.StringVar(&k.conn.SASLPasswordFile, "sasl-password-file", os.Getenv("KAAS_SASL_PASSWORD_FILE"), "file holding the SASL password (KAAS_SASL_PASSWORD_FILE)")
	k.conn.ClientID = "kaasctl"
}

// repeated is a flag given any number of times.
type repeated []string

func (r *repeated) String() string     { return "" }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

package main

// `kaasctl quotas`: a cluster's client quotas through the Kafka APIs
// (DescribeClientQuotas, AlterClientQuotas), with kafka-configs.sh's
// entities and --add/--delete, so it manages any Kafka cluster's quotas.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kaas-dev/kaas/cmd/internal/kafkaadmin"
)

const quotasUsage = `usage:
  kaasctl quotas list [ENTITY] --bootstrap H:P [-o table|json]
  kaasctl quotas set ENTITY [--add KEY=VALUE[,KEY=VALUE]...] [--delete KEY[,KEY]...] --bootstrap H:P

ENTITY: --user U or --user-default, and/or --client-id C or --client-id-default; or
kafka-configs.sh's --entity-type users|clients with --entity-name N or --entity-default.
KEY: producer_byte_rate, consumer_byte_rate, request_percentage. list without an entity
shows every entity's quotas; with one, that entity's only.
Connection: --sasl-mechanism, --sasl-username, --sasl-password-file, --tls, --tls-ca-file
(KAAS_BOOTSTRAP, KAAS_SASL_*, KAAS_TLS*)`

// quotaArgs are `kaasctl quotas VERB`'s flags.
type quotaArgs struct {
	verb                                   string
	user, clientID, entityType, entityName string
	userDefault, clientIDDefault           bool
	entityDefault                          bool
	userSet, clientIDSet, entityNameSet    bool // the flag was given, even empty
	add, del                               repeated
	output                                 string
	timeout                                time.Duration
	kafka                                  kafkaFlags
}

func parseQuotaArgs(args []string) (*quotaArgs, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return nil, errors.New(quotasUsage)
	}
	q := &quotaArgs{verb: args[0]}
	if q.verb != "list" && q.verb != "set" {
		return nil, fmt.Errorf("unknown verb %q\n%s", q.verb, quotasUsage)
	}
	fs := flag.NewFlagSet("kaasctl quotas "+q.verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	q.kafka.register(fs)
	fs.StringVar(&q.user, "user", "", "the user entity")
	fs.BoolVar(&q.userDefault, "user-default", false, "the default user entity")
	fs.StringVar(&q.clientID, "client-id", "", "the client-id entity")
	fs.BoolVar(&q.clientIDDefault, "client-id-default", false, "the default client-id entity")
	fs.StringVar(&q.entityType, "entity-type", "", "users or clients (with --entity-name or --entity-default)")
	fs.StringVar(&q.entityName, "entity-name", "", "the entity's name")
	fs.BoolVar(&q.entityDefault, "entity-default", false, "the default entity of --entity-type")
	fs.Var(&q.add, "add", "KEY=VALUE[,KEY=VALUE] to set (repeatable)")
	fs.Var(&q.del, "delete", "KEY[,KEY] to remove (repeatable)")
	fs.StringVar(&q.output, "o", "table", "output: table or json")
	fs.StringVar(&q.output, "output", "table", "output: table or json")
	fs.DurationVar(&q.timeout, "timeout", 15*time.Second, "how long to wait for the cluster's answers")
	if err := fs.Parse(args[1:]); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, quotasUsage)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %v\n%s", fs.Args(), quotasUsage)
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "user":
			q.userSet = true
		case "client-id":
			q.clientIDSet = true
		case "entity-name":
			q.entityNameSet = true
		}
	})
	if q.output != "table" && q.output != "json" {
		return nil, fmt.Errorf("-o must be table or json, not %q", q.output)
	}
	return q, nil
}

// entitySide is one part of the entity the flags name: given, the
// default one, or its name.
type entitySide struct {
	given, isDefault bool
	name             string
}

// entity is the entity the flags name (nil: none).
func (q *quotaArgs) entity() (kafkaadmin.Entity, error) {
	if q.userSet && q.userDefault || q.clientIDSet && q.clientIDDefault {
		return nil, errors.New("give a name or the default entity, not both")
	}
	user := entitySide{given: q.userSet || q.userDefault, isDefault: q.userDefault, name: q.user}
	client := entitySide{given: q.clientIDSet || q.clientIDDefault, isDefault: q.clientIDDefault, name: q.clientID}
	if q.entityType != "" || q.entityNameSet || q.entityDefault {
		if q.entityNameSet == q.entityDefault {
			return nil, errors.New("--entity-type needs --entity-name N or --entity-default")
		}
		var side *entitySide
		switch q.entityType {
		case "users", "user":
			side = &user
		case "clients", "client-id":
			side = &client
		default:
			return nil, fmt.Errorf("--entity-type %q: users or clients", q.entityType)
		}
		if side.given {
			return nil, fmt.Errorf("--entity-type %s names the same entity as another flag", q.entityType)
		}
		*side = entitySide{given: true, isDefault: q.entityDefault, name: q.entityName}
	}
	var e kafkaadmin.Entity
	for _, s := range []struct {
		typ  string
		side entitySide
	}{{kafkaadmin.EntityUser, user}, {kafkaadmin.EntityClientID, client}} {
		if !s.side.given {
			continue
		}
		p := kafkaadmin.EntityPart{Type: s.typ}
		if !s.side.isDefault {
			if s.side.name == "" {
				return nil, fmt.Errorf("the %s entity's name is empty: give a name or the default entity", s.typ)
			}
			name := s.side.name
			p.Name = &name
		}
		e = append(e, p)
	}
	return e, nil
}

var quotaKeys = []string{kafkaadmin.ConsumerByteRate, kafkaadmin.ProducerByteRate, kafkaadmin.RequestPercentage}

func checkQuotaKey(k string) error {
	for _, known := range quotaKeys {
		if k == known {
			return nil
		}
	}
	return fmt.Errorf("quota key %q: %s", k, strings.Join(quotaKeys, ", "))
}

// alterations are what `quotas set` changes.
func (q *quotaArgs) alterations() (map[string]float64, []string, error) {
	set := map[string]float64{}
	for _, a := range q.add {
		for _, kv := range strings.Split(a, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return nil, nil, fmt.Errorf("--add %q: KEY=VALUE", kv)
			}
			if err := checkQuotaKey(k); err != nil {
				return nil, nil, err
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 {
				return nil, nil, fmt.Errorf("--add %s=%s: the value must be a positive number", k, v)
			}
			set[k] = f
		}
	}
	var remove []string
	for _, d := range q.del {
		for _, k := range strings.Split(d, ",") {
			k = strings.TrimSpace(k)
			if err := checkQuotaKey(k); err != nil {
				return nil, nil, err
			}
			if _, both := set[k]; both {
				return nil, nil, fmt.Errorf("%s is both added and deleted", k)
			}
			remove = append(remove, k)
		}
	}
	if len(set) == 0 && len(remove) == 0 {
		return nil, nil, errors.New("quotas set needs --add KEY=VALUE or --delete KEY")
	}
	return set, remove, nil
}

// quotasCmd runs `kaasctl quotas ARGS`.
func quotasCmd(args []string, out io.Writer) error {
	q, err := parseQuotaArgs(args)
	if err != nil {
		return err
	}
	e, err := q.entity()
	if err != nil {
		return err
	}
	var set map[string]float64
	var remove []string
	if q.verb == "set" {
		if len(e) == 0 {
			return errors.New("quotas set needs an entity: --user, --user-default, --client-id or --client-id-default")
		}
		if set, remove, err = q.alterations(); err != nil {
			return err
		}
	}
	cl, err := kafkaadmin.NewClient(q.kafka.conn)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	if q.verb == "set" {
		if err := kafkaadmin.AlterQuotas(ctx, cl, e, set, remove); err != nil {
			return err
		}
	}
	entries, err := kafkaadmin.DescribeQuotas(ctx, cl, kafkaadmin.EntityComponents(e), len(e) > 0)
	if err != nil {
		return err
	}
	return printQuotas(out, q.output, entries)
}

// quotaRow is one entity's quotas as quotas prints them: its user and
// client ID parts (each a name or the default entity) and its keys.
type quotaRow struct {
	User            *string            `json:"user,omitempty"`
	UserDefault     bool               `json:"userDefault,omitempty"`
	ClientID        *string            `json:"clientId,omitempty"`
	ClientIDDefault bool               `json:"clientIdDefault,omitempty"`
	Values          map[string]float64 `json:"values"`
}

func quotaRows(entries []kafkaadmin.QuotaEntry) []quotaRow {
	rows := make([]quotaRow, 0, len(entries))
	for _, e := range entries {
		r := quotaRow{Values: e.Values}
		for _, p := range e.Entity {
			switch p.Type {
			case kafkaadmin.EntityUser:
				r.User, r.UserDefault = p.Name, p.Name == nil
			case kafkaadmin.EntityClientID:
				r.ClientID, r.ClientIDDefault = p.Name, p.Name == nil
			}
		}
		rows = append(rows, r)
	}
	return rows
}

func entityCell(name *string, isDefault bool) string {
	switch {
	case isDefault:
		return "<default>"
	case name == nil:
		return "-"
	}
	return *name
}

func printQuotas(out io.Writer, output string, entries []kafkaadmin.QuotaEntry) error {
	rows := quotaRows(entries)
	if output == "json" {
		return printJSON(out, rows)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tCLIENT ID\tQUOTAS")
	for _, r := range rows {
		keys := make([]string, 0, len(r.Values))
		for k := range r.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		vals := make([]string, len(keys))
		for i, k := range keys {
			vals[i] = k + "=" + strconv.FormatFloat(r.Values[k], 'f', -1, 64)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", entityCell(r.User, r.UserDefault),
			entityCell(r.ClientID, r.ClientIDDefault), strings.Join(vals, ","))
	}
	return tw.Flush()
}

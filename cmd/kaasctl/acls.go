package main

// `kaasctl acls`: a cluster's ACL bindings through the Kafka APIs
// (DescribeAcls, CreateAcls, DeleteAcls), with kafka-acls.sh's flags, so it
// manages any Kafka cluster's ACLs too.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/cmd/internal/kafkaadmin"
)

const aclsUsage = `usage:
  kaasctl acls list   [--principal P] [--allow-principal P] [--deny-principal P] [--host H] [--operation OP]
                      [RESOURCE...] [--resource-pattern-type any|match|literal|prefixed] --bootstrap H:P
  kaasctl acls add    --allow-principal P | --deny-principal P [--allow-host H] [--deny-host H]
                      [--operation OP...] RESOURCE... [--resource-pattern-type literal|prefixed] --bootstrap H:P
  kaasctl acls remove [--principal P | --allow-principal P | --deny-principal P] [--allow-host H] [--deny-host H]
                      [--operation OP...] RESOURCE... [--resource-pattern-type literal|prefixed|any|match] --bootstrap H:P

RESOURCE: --topic T, --group G, --transactional-id X (each repeatable), --cluster.
P is a principal (User:alice, User:* for everyone); OP is Read, Write, Create, Delete, Alter,
Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite or All (add's default).
add creates every principal x host x operation x resource binding (host default *);
list and remove match bindings: a flag not given matches any value (pattern type: list any,
remove literal). remove asks nothing: it deletes what matches and prints it.
Connection: --sasl-mechanism, --sasl-username, --sasl-password-file, --tls, --tls-ca-file
(KAAS_BOOTSTRAP, KAAS_SASL_*, KAAS_TLS*). Output: -o table (default) or -o json`

// aclArgs are `kaasctl acls VERB`'s flags.
type aclArgs struct {
	verb                                        string
	principals, allowPrincipals, denyPrincipals repeated
	hosts, allowHosts, denyHosts, operations    repeated
	topics, groups, txnIDs                      repeated
	cluster                                     bool
	patternType, output                         string
	timeout                                     time.Duration
	kafka                                       kafkaFlags
}

// aclResource is one resource a command names.
type aclResource struct {
	typ  kmsg.ACLResourceType
	name string
}

const clusterResourceName = "kafka-cluster"

func parseACLArgs(args []string) (*aclArgs, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return nil, errors.New(aclsUsage)
	}
	a := &aclArgs{verb: args[0]}
	if a.verb != "list" && a.verb != "add" && a.verb != "remove" {
		return nil, fmt.Errorf("unknown verb %q\n%s", a.verb, aclsUsage)
	}
	fs := flag.NewFlagSet("kaasctl acls "+a.verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.kafka.register(fs)
	fs.Var(&a.principals, "principal", "list/remove: a principal whose bindings match (either permission)")
	fs.Var(&a.allowPrincipals, "allow-principal", "a principal allowed (repeatable)")
	fs.Var(&a.denyPrincipals, "deny-principal", "a principal denied (repeatable)")
	fs.Var(&a.hosts, "host", "list/remove: a host whose bindings match")
	fs.Var(&a.allowHosts, "allow-host", "host the allowed principals are allowed from (default *)")
	fs.Var(&a.denyHosts, "deny-host", "host the denied principals are denied from (default *)")
	fs.Var(&a.operations, "operation", "an operation (repeatable)")
	fs.Var(&a.topics, "topic", "a topic (repeatable)")
	fs.Var(&a.groups, "group", "a consumer group (repeatable)")
	fs.Var(&a.txnIDs, "transactional-id", "a transactional ID (repeatable)")
	fs.BoolVar(&a.cluster, "cluster", false, "the cluster resource")
	fs.StringVar(&a.patternType, "resource-pattern-type", "", "literal or prefixed; list and remove also any and match")
	fs.StringVar(&a.output, "o", "table", "output: table or json")
	fs.StringVar(&a.output, "output", "table", "output: table or json")
	fs.DurationVar(&a.timeout, "timeout", 15*time.Second, "how long to wait for the cluster's answers")
	if err := fs.Parse(args[1:]); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, aclsUsage)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %v\n%s", fs.Args(), aclsUsage)
	}
	if a.output != "table" && a.output != "json" {
		return nil, fmt.Errorf("-o must be table or json, not %q", a.output)
	}
	return a, nil
}

func (a *aclArgs) resources() []aclResource {
	var rs []aclResource
	for _, t := range a.topics {
		rs = append(rs, aclResource{kmsg.ACLResourceTypeTopic, t})
	}
	for _, g := range a.groups {
		rs = append(rs, aclResource{kmsg.ACLResourceTypeGroup, g})
	}
	for _, x := range a.txnIDs {
		rs = append(rs, aclResource{kmsg.ACLResourceTypeTransactionalId, x})
	}
	if a.cluster {
		rs = append(rs, aclResource{kmsg.ACLResourceTypeCluster, clusterResourceName})
	}
	return rs
}

// parsePatternType reads --resource-pattern-type; filter says whether any
// and match are allowed.
func parsePatternType(s, def string, filter bool) (kmsg.ACLResourcePatternType, error) {
	if s == "" {
		s = def
	}
	if strings.EqualFold(s, "prefix") { // Strimzi's spelling
		s = "prefixed"
	}
	p, err := kmsg.ParseACLResourcePatternType(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("--resource-pattern-type %q: literal, prefixed, any or match", s)
	case !filter && p != kmsg.ACLResourcePatternTypeLiteral && p != kmsg.ACLResourcePatternTypePrefixed:
		return 0, fmt.Errorf("--resource-pattern-type %q: a binding is literal or prefixed", s)
	}
	return p, nil
}

// operationsFor says which operations each resource type has, as
// kafka-acls.sh checks them.
var operationsFor = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	kmsg.ACLResourceTypeTopic: {kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate,
		kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationAll},
	kmsg.ACLResourceTypeGroup: {kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete,
		kmsg.ACLOperationAll},
	kmsg.ACLResourceTypeCluster: {kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite,
		kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationAll},
	kmsg.ACLResourceTypeTransactionalId: {kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite, kmsg.ACLOperationAll},
}

// parseOperation reads an operation's name in Kafka's spellings (Read,
// IdempotentWrite, IDEMPOTENT_WRITE, idempotent-write).
func parseOperation(s string) (kmsg.ACLOperation, error) {
	op, err := kmsg.ParseACLOperation(s)
	if err != nil || op == kmsg.ACLOperationAny {
		return 0, fmt.Errorf("--operation %q: Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite or All", s)
	}
	return op, nil
}

func allowedOn(op kmsg.ACLOperation, t kmsg.ACLResourceType) bool {
	for _, o := range operationsFor[t] {
		if o == op {
			return true
		}
	}
	return false
}

func checkPrincipal(p string) error {
	if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
		return fmt.Errorf("principal %q is not TYPE:NAME, e.g. User:alice", p)
	}
	return nil
}

// bindings are what `acls add` creates.
func (a *aclArgs) bindings() ([]kafkaadmin.Binding, error) {
	if len(a.principals) > 0 || len(a.hosts) > 0 {
		return nil, errors.New("acls add takes --allow-principal/--deny-principal and --allow-host/--deny-host")
	}
	if len(a.allowPrincipals)+len(a.denyPrincipals) == 0 {
		return nil, errors.New("acls add needs --allow-principal or --deny-principal")
	}
	if len(a.allowHosts) > 0 && len(a.allowPrincipals) == 0 || len(a.denyHosts) > 0 && len(a.denyPrincipals) == 0 {
		return nil, errors.New("--allow-host needs --allow-principal, --deny-host needs --deny-principal")
	}
	rs := a.resources()
	if len(rs) == 0 {
		return nil, errors.New("acls add needs a resource: --topic, --group, --transactional-id or --cluster")
	}
	pt, err := parsePatternType(a.patternType, "literal", false)
	if err != nil {
		return nil, err
	}
	if pt == kmsg.ACLResourcePatternTypePrefixed && a.cluster {
		return nil, errors.New("the cluster resource is literal only")
	}
	ops := []kmsg.ACLOperation{kmsg.ACLOperationAll}
	if len(a.operations) > 0 {
		ops = ops[:0]
		for _, s := range a.operations {
			op, err := parseOperation(s)
			if err != nil {
				return nil, err
			}
			ops = append(ops, op)
		}
	}
	var out []kafkaadmin.Binding
	for _, side := range []struct {
		perm              kmsg.ACLPermissionType
		principals, hosts []string
	}{
		{kmsg.ACLPermissionTypeAllow, a.allowPrincipals, a.allowHosts},
		{kmsg.ACLPermissionTypeDeny, a.denyPrincipals, a.denyHosts},
	} {
		hosts := side.hosts
		if len(hosts) == 0 {
			hosts = []string{"*"}
		}
		for _, p := range side.principals {
			if err := checkPrincipal(p); err != nil {
				return nil, err
			}
			for _, h := range hosts {
				for _, r := range rs {
					for _, op := range ops {
						if !allowedOn(op, r.typ) {
							return nil, fmt.Errorf("operation %s does not apply to %s %q", op, r.typ, r.name)
						}
						out = append(out, kafkaadmin.Binding{Principal: p, Host: h, ResourceType: r.typ, ResourceName: r.name,
							PatternType: pt, Operation: op, Permission: side.perm})
					}
				}
			}
		}
	}
	return out, nil
}

// filters are what `acls list` and `acls remove` match: every combination
// of the principals, hosts, operations and resources given, each one
// missing matching any value.
func (a *aclArgs) filters() ([]kafkaadmin.Filter, error) {
	def := "any"
	if a.verb == "remove" {
		def = "literal"
	}
	pt, err := parsePatternType(a.patternType, def, true)
	if err != nil {
		return nil, err
	}
	rs := a.resources()
	if a.verb == "remove" && len(rs) == 0 {
		return nil, errors.New("acls remove needs a resource: --topic, --group, --transactional-id or --cluster")
	}
	type who struct {
		principal *string
		perm      kmsg.ACLPermissionType
		hosts     []string
	}
	var whos []who
	for _, side := range []struct {
		perm              kmsg.ACLPermissionType
		principals, hosts []string
	}{
		{kmsg.ACLPermissionTypeAny, a.principals, a.hosts},
		{kmsg.ACLPermissionTypeAllow, a.allowPrincipals, a.allowHosts},
		{kmsg.ACLPermissionTypeDeny, a.denyPrincipals, a.denyHosts},
	} {
		for _, p := range side.principals {
			if err := checkPrincipal(p); err != nil {
				return nil, err
			}
			whos = append(whos, who{principal: &p, perm: side.perm, hosts: side.hosts})
		}
	}
	if len(whos) == 0 {
		hosts := append(append(append([]string(nil), a.hosts...), a.allowHosts...), a.denyHosts...)
		whos = []who{{perm: kmsg.ACLPermissionTypeAny, hosts: hosts}}
	}
	ops := []kmsg.ACLOperation{kmsg.ACLOperationAny}
	if len(a.operations) > 0 {
		ops = ops[:0]
		for _, s := range a.operations {
			op, err := parseOperation(s)
			if err != nil {
				return nil, err
			}
			ops = append(ops, op)
		}
	}
	type res struct {
		typ  kmsg.ACLResourceType
		name *string
	}
	var ress []res
	for _, r := range rs {
		ress = append(ress, res{typ: r.typ, name: &r.name})
	}
	if len(ress) == 0 {
		ress = []res{{typ: kmsg.ACLResourceTypeAny}}
	}
	var out []kafkaadmin.Filter
	for _, w := range whos {
		hosts := []*string{nil}
		if len(w.hosts) > 0 {
			hosts = hosts[:0]
			for _, h := range w.hosts {
				hosts = append(hosts, &h)
			}
		}
		for _, h := range hosts {
			for _, r := range ress {
				for _, op := range ops {
					out = append(out, kafkaadmin.Filter{Principal: w.principal, Host: h, ResourceName: r.name,
						ResourceType: r.typ, PatternType: pt, Operation: op, Permission: w.perm})
				}
			}
		}
	}
	return out, nil
}

// aclsCmd runs `kaasctl acls ARGS`.
func aclsCmd(args []string, out io.Writer) error {
	a, err := parseACLArgs(args)
	if err != nil {
		return err
	}
	var bs []kafkaadmin.Binding
	var fs []kafkaadmin.Filter
	if a.verb == "add" {
		bs, err = a.bindings()
	} else {
		fs, err = a.filters()
	}
	if err != nil {
		return err
	}
	cl, err := kafkaadmin.NewClient(a.kafka.conn)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	switch a.verb {
	case "add":
		if err := kafkaadmin.CreateACLs(ctx, cl, bs); err != nil {
			return err
		}
		return printACLs(out, a.output, bs)
	case "remove":
		deleted, err := kafkaadmin.DeleteACLs(ctx, cl, fs)
		if perr := printACLs(out, a.output, deleted); perr != nil && err == nil {
			err = perr
		}
		return err
	}
	seen := map[kafkaadmin.Binding]bool{}
	var all []kafkaadmin.Binding
	for _, f := range fs {
		got, err := kafkaadmin.DescribeACLs(ctx, cl, f)
		if err != nil {
			return err
		}
		for _, b := range got {
			if !seen[b] {
				seen[b] = true
				all = append(all, b)
			}
		}
	}
	kafkaadmin.SortBindings(all)
	return printACLs(out, a.output, all)
}

// aclRow is one binding as acls prints it.
type aclRow struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Permission   string `json:"permission"`
	Operation    string `json:"operation"`
	ResourceType string `json:"resourceType"`
	ResourceName string `json:"resourceName"`
	PatternType  string `json:"patternType"`
}

func aclRows(bs []kafkaadmin.Binding) []aclRow {
	rows := make([]aclRow, 0, len(bs))
	for _, b := range bs {
		rows = append(rows, aclRow{Principal: b.Principal, Host: b.Host, Permission: b.Permission.String(),
			Operation: b.Operation.String(), ResourceType: b.ResourceType.String(), ResourceName: b.ResourceName,
			PatternType: b.PatternType.String()})
	}
	return rows
}

func printACLs(out io.Writer, output string, bs []kafkaadmin.Binding) error {
	rows := aclRows(bs)
	if output == "json" {
		return printJSON(out, rows)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tHOST\tPERMISSION\tOPERATION\tRESOURCE TYPE\tRESOURCE NAME\tPATTERN")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Principal, r.Host, r.Permission, r.Operation,
			r.ResourceType, r.ResourceName, r.PatternType)
	}
	return tw.Flush()
}

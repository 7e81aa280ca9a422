package wire

// DescribeConfigs: versions 1-4.
//
// Behavior:
// * Topic resources: every topic config kaas understands, with its value
//   and source: DYNAMIC_TOPIC_CONFIG when the topic sets it, else
//   DEFAULT_CONFIG. The desired state is read from the volume, so a change
//   made through any broker shows at once. Topic configs are not read-only
//   (AlterConfigs and IncrementalAlterConfigs change them).
// * Broker resources: the Kafka-named configs that describe what this
//   broker really does (its ID, data directory, auto-creation, defaults of
//   topic configs, group, transaction and request limits), all read-only:
//   kaas brokers are configured by flags at start. A flag set away from
//   its default is STATIC_BROKER_CONFIG, else DEFAULT_CONFIG; the broker's
//   ID and data directory are always STATIC_BROKER_CONFIG. The resource
//   name is this broker's ID, or "" (this broker too: kaas has no
//   cluster-wide dynamic configs); another broker's ID is INVALID_REQUEST,
//   as in Kafka (clients send broker resources to the broker they name).
// * ConfigNames narrows the answer; names kaas does not know are left out.
// * Synonyms (IncludeSynonyms) list the sources in precedence order: the
//   topic's own value, then the broker-level config that gives the default
//   (log.retention.ms for retention.ms).
// * Unknown topics: UNKNOWN_TOPIC_OR_PARTITION; invalid topic names:
//   INVALID_TOPIC_EXCEPTION; other resource types (broker loggers, client
//   metrics, groups): INVALID_REQUEST with a message.
// * Authorization (Kafka's): DESCRIBE_CONFIGS on the topic
//   (TOPIC_AUTHORIZATION_FAILED), or on the cluster for a broker or broker
//   logger resource (CLUSTER_AUTHORIZATION_FAILED), with a message;
//   checked before the resource is looked up.
//
// Version notes:
// * v1: IncludeSynonyms, Source
// * v2: same as v1
// * v3: IncludeDocumentation; ConfigType and Documentation in the answer
// * v4: flexible

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/desired"
)

func handleDescribeConfigs(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	c.async(r, func() {
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rr := range req.Resources {
			sr := kmsg.NewDescribeConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			entries, err := c.describeResource(rr.ResourceType, rr.ResourceName)
			if err != nil {
				sr.ErrorCode, sr.ErrorMessage = errorCode(err), errMessage(err)
				resp.Resources = append(resp.Resources, sr)
				continue
			}
			want := map[string]bool{}
			for _, n := range rr.ConfigNames {
				want[n] = true
			}
			for _, e := range entries {
				if len(want) > 0 && !want[e.Name] {
					continue
				}
				sr.Configs = append(sr.Configs, describeEntry(e, req.IncludeSynonyms, req.IncludeDocumentation))
			}
			resp.Resources = append(resp.Resources, sr)
		}
		r.finish(resp)
	})
}

// describeResource lists a topic's or this broker's configs.
func (c *conn) describeResource(typ kmsg.ConfigResourceType, name string) ([]desired.ConfigEntry, error) {
	if err := c.configsAllowed(kmsg.ACLOperationDescribeConfigs, typ, name); err != nil {
		return nil, err
	}
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		spec, err := c.s.eng.TopicSpecNow(name)
		if err != nil {
			return nil, err
		}
		return desired.TopicConfigEntries(spec), nil
	case kmsg.ConfigResourceTypeBroker:
		if err := c.checkBrokerResource(name); err != nil {
			return nil, err
		}
		entries := append(c.s.eng.BrokerConfigEntries(), c.s.serverConfigEntries()...)
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
		return entries, nil
	default:
		return nil, unsupportedResource(typ)
	}
}

// checkBrokerResource accepts "" and this broker's ID, as a Kafka broker
// does.
func (c *conn) checkBrokerResource(name string) error {
	if name == "" {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return &codedError{code: kerr.InvalidRequest.Code, err: fmt.Errorf("broker id must be an integer, but it is: %s", name)}
	}
	if self := c.s.eng.BrokerID(); int32(id) != self {
		return &codedError{code: kerr.InvalidRequest.Code,
			err: fmt.Errorf("unexpected broker id, expected %d or empty string, but received %s (send broker resources to the broker they name)", self, name)}
	}
	return nil
}

func unsupportedResource(typ kmsg.ConfigResourceType) error {
	return &codedError{code: kerr.InvalidRequest.Code,
		err: fmt.Errorf("unsupported resource type: %s (%d); kaas serves TOPIC and BROKER configs", typ, int8(typ))}
}

// serverConfigEntries describes the front end's own broker configs.
func (s *Server) serverConfigEntries() []desired.ConfigEntry {
	entry := func(name string, value, def int64, typ desired.ConfigType, doc string) desired.ConfigEntry {
		v, d := strconv.FormatInt(value, 10), strconv.FormatInt(def, 10)
		e := desired.ConfigEntry{Name: name, Value: v, Source: desired.SourceDefault, ReadOnly: true, Type: typ, Doc: doc}
		if v != d {
			e.Source = desired.SourceStaticBroker
			e.Synonyms = append(e.Synonyms, desired.ConfigSynonym{Name: name, Value: v, Source: desired.SourceStaticBroker})
		}
		e.Synonyms = append(e.Synonyms, desired.ConfigSynonym{Name: name, Value: d, Source: desired.SourceDefault})
		return e
	}
	return []desired.ConfigEntry{
		entry("socket.request.max.bytes", int64(s.cfg.MaxFrameBytes), 100<<20, desired.ConfigTypeInt,
			"The largest request frame accepted; a larger one closes the connection (kaas-broker --max-request-bytes)."),
		entry("queued.max.request.bytes", s.cfg.MaxQueuedBytes, 512<<20, desired.ConfigTypeLong,
			"The memory budget shared by all request frames being read and dispatched (kaas-broker --max-queued-request-bytes)."),
		entry("connections.max.idle.ms", s.cfg.IdleTimeout.Milliseconds(), (10 * time.Minute).Milliseconds(), desired.ConfigTypeLong,
			"Connections with no request for this long are closed."),
	}
}

func describeEntry(e desired.ConfigEntry, synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	rc := kmsg.NewDescribeConfigsResponseResourceConfig()
	rc.Name = e.Name
	v := e.Value
	rc.Value = &v
	rc.ReadOnly, rc.IsSensitive = e.ReadOnly, e.Sensitive
	rc.Source = kmsg.ConfigSource(e.Source)
	rc.IsDefault = e.Source == desired.SourceDefault
	rc.ConfigType = kmsg.ConfigType(e.Type)
	if docs && e.Doc != "" {
		d := e.Doc
		rc.Documentation = &d
	}
	if synonyms {
		for _, s := range e.Synonyms {
			sy := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			sv := s.Value
			sy.Name, sy.Value, sy.Source = s.Name, &sv, kmsg.ConfigSource(s.Source)
			rc.ConfigSynonyms = append(rc.ConfigSynonyms, sy)
		}
	}
	return rc
}

// alterResource is one resource of AlterConfigs or IncrementalAlterConfigs,
// checked for what both refuse before a topic's configs are touched.
// It returns the error for the resource, or nil to go on with a topic.
func (c *conn) alterResourceCheck(typ kmsg.ConfigResourceType, name string, keys []string, dupResource bool) error {
	invalid := func(format string, args ...any) error {
		return &codedError{code: kerr.InvalidRequest.Code, err: fmt.Errorf(format, args...)}
	}
	if dupResource {
		return invalid("duplicate resource %s %q in the request", typ, name)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			return invalid("error due to duplicate config keys: %s", k)
		}
		seen[k] = true
	}
	if err := c.configsAllowed(kmsg.ACLOperationAlterConfigs, typ, name); err != nil {
		return err
	}
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if err := desired.ValidTopicName(name); err != nil {
			return fmt.Errorf("%w: %v", desired.ErrInvalidTopic, err)
		}
		return nil
	case kmsg.ConfigResourceTypeBroker:
		if name != "" {
			if _, err := strconv.ParseInt(name, 10, 32); err != nil {
				return invalid("broker id must be an integer, but it is: %s", name)
			}
		}
		if len(keys) == 0 {
			return errNothingToDo
		}
		sort.Strings(keys)
		return invalid("cannot update these configs dynamically: %v (kaas brokers are configured by flags at start; their configs are read-only)", keys)
	default:
		return unsupportedResource(typ)
	}
}

// errNothingToDo: a broker resource altered with no configs succeeds.
var errNothingToDo = errors.New("nothing to do")

// resourceKey names a resource for duplicate detection.
func resourceKey(typ kmsg.ConfigResourceType, name string) string {
	return strconv.Itoa(int(typ)) + "/" + name
}

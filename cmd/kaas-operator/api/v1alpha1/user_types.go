package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UserFinalizer holds a User resource until its credential is deleted from
// the volume (and its ACLs and quotas from the cluster).
const UserFinalizer = "kaas.io/user-credential"

// Defaults of a User.
const (
	DefaultUserMechanism = "SCRAM-SHA-512"
	DefaultPasswordKey   = "password"
)

// User is a SCRAM user of kaas: kaas-operator writes its credential into
// the credential files on the brokers' shared volume.
type User struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   UserSpec   `json:"spec,omitempty"`
	Status UserStatus `json:"status,omitempty"`
}

// UserSpec is what the resource asks for.
type UserSpec struct {
	// UserName is the Kafka user's name; empty means metadata.name. It
	// cannot change after creation.
	UserName string `json:"userName,omitempty"`
	// Mechanism is SCRAM-SHA-512 (the default) or SCRAM-SHA-256.
	Mechanism string `json:"mechanism,omitempty"`
	// PasswordSecretRef names the Secret key holding the password; without
	// it the operator generates a password into a Secret the User owns.
	PasswordSecretRef *SecretKeyRef `json:"passwordSecretRef,omitempty"`
	// Authorization, when set, is every ACL binding of the principal
	// User:<userName>: the operator creates the missing ones and deletes
	// the others (Strimzi's KafkaUser shape).
	Authorization *UserAuthorization `json:"authorization,omitempty"`
	// Quotas, when set, are the user entity's client quotas; a rate left
	// out has none.
	Quotas *UserQuotas `json:"quotas,omitempty"`
}

// ACL resource types, pattern types and rule types of a User's rules.
const (
	AuthorizationSimple = "simple"

	ACLResourceTopic           = "topic"
	ACLResourceGroup           = "group"
	ACLResourceTransactionalID = "transactionalId"
	ACLResourceCluster         = "cluster"

	ACLPatternLiteral = "literal"
	ACLPatternPrefix  = "prefix"

	ACLRuleAllow = "allow"
	ACLRuleDeny  = "deny"
)

// UserAuthorization is the user's ACLs.
type UserAuthorization struct {
	// Type is simple: Kafka's ACLs.
	Type string    `json:"type"`
	ACLs []ACLRule `json:"acls,omitempty"`
}

// ACLRule allows (or denies) operations on a resource from a host.
type ACLRule struct {
	Resource ACLRuleResource `json:"resource"`
	// Operations: Read, Write, Create, Delete, Alter, Describe,
	// ClusterAction, AlterConfigs, DescribeConfigs, IdempotentWrite, All.
	Operations []string `json:"operations"`
	// Host is the host the rule holds for (default *: every host).
	Host string `json:"host,omitempty"`
	// Type is allow (the default) or deny.
	Type string `json:"type,omitempty"`
}

// ACLRuleResource is what an ACLRule is about.
type ACLRuleResource struct {
	// Type is topic, group, transactionalId or cluster.
	Type string `json:"type"`
	// Name is the resource's name, or its prefix; * is every resource of
	// the type. The cluster has none.
	Name string `json:"name,omitempty"`
	// PatternType is literal (the default) or prefix.
	PatternType string `json:"patternType,omitempty"`
}

// UserQuotas are Kafka's client quotas of the user.
type UserQuotas struct {
	// ProducerByteRate is producer_byte_rate, bytes per second.
	ProducerByteRate *int64 `json:"producerByteRate,omitempty"`
	// ConsumerByteRate is consumer_byte_rate, bytes per second.
	ConsumerByteRate *int64 `json:"consumerByteRate,omitempty"`
	// RequestPercentage is request_percentage, percent of one I/O thread.
	RequestPercentage *int64 `json:"requestPercentage,omitempty"`
}

// SecretKeyRef is one key of a Secret in the User's namespace.
type SecretKeyRef struct {
	Name string `json:"name"`
	// Key defaults to "password".
	Key string `json:"key,omitempty"`
}

// UserStatus is what the operator wrote.
type UserStatus struct {
	// ObservedGeneration is the resource generation this status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// UserName and Mechanism are the credential on the volume.
	UserName  string `json:"userName,omitempty"`
	Mechanism string `json:"mechanism,omitempty"`
	// SecretName is the Secret the password is read from (the generated
	// one when the spec names none).
	SecretName string `json:"secretName,omitempty"`
	// ACLPrincipal is the principal whose ACLs the operator manages
	// (set once spec.authorization was applied); ACLs how many bindings
	// it holds.
	ACLPrincipal string `json:"aclPrincipal,omitempty"`
	ACLs         int32  `json:"acls,omitempty"`
	// QuotaUser is the user entity whose quotas the operator manages.
	QuotaUser string `json:"quotaUser,omitempty"`
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// UserList is a list of Users.
type UserList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []User `json:"items"`
}

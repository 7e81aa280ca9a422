package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UserFinalizer holds a User resource until its credential is deleted from
// the volume.
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

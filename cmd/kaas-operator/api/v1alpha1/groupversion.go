// Package v1alpha1 is the kaas.io/v1alpha1 API: the Topic resource, a
// Kafka topic declared on Kubernetes and written by kaas-operator to the
// desired state on the brokers' shared volume; and the User resource, a
// SCRAM user whose credential it writes into the credential files there.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is kaas.io/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "kaas.io", Version: "v1alpha1"}

// SchemeBuilder registers the kinds of this version.
var SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

// AddToScheme adds Topic, User and their lists to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Topic{}, &TopicList{}, &User{}, &UserList{})
	metav1.AddToGroupVersion(s, GroupVersion) // ListOptions and friends, for clients
	return nil
}

package v1alpha1

import (
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Hand-written: the types are small, and no code generator is needed to
// keep them right (deepcopy_test.go checks that copies share nothing).

// DeepCopyInto copies t into out.
func (t *Topic) DeepCopyInto(out *Topic) {
	*out = *t
	out.TypeMeta = t.TypeMeta
	t.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	t.Spec.DeepCopyInto(&out.Spec)
	t.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of t.
func (t *Topic) DeepCopy() *Topic {
	if t == nil {
		return nil
	}
	out := new(Topic)
	t.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (t *Topic) DeepCopyObject() runtime.Object { return t.DeepCopy() }

// DeepCopyInto copies s into out.
func (s *TopicSpec) DeepCopyInto(out *TopicSpec) {
	*out = *s
	if s.Config != nil {
		out.Config = maps.Clone(s.Config)
	}
}

// DeepCopy returns a copy of s.
func (s *TopicSpec) DeepCopy() *TopicSpec {
	if s == nil {
		return nil
	}
	out := new(TopicSpec)
	s.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies s into out.
func (s *TopicStatus) DeepCopyInto(out *TopicStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	out.Partitions = slices.Clone(s.Partitions) // PartitionStatus holds no pointers
}

// DeepCopy returns a copy of s.
func (s *TopicStatus) DeepCopy() *TopicStatus {
	if s == nil {
		return nil
	}
	out := new(TopicStatus)
	s.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies l into out.
func (l *TopicList) DeepCopyInto(out *TopicList) {
	*out = *l
	out.TypeMeta = l.TypeMeta
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Topic, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l.
func (l *TopicList) DeepCopy() *TopicList {
	if l == nil {
		return nil
	}
	out := new(TopicList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *TopicList) DeepCopyObject() runtime.Object { return l.DeepCopy() }

// DeepCopyInto copies u into out.
func (u *User) DeepCopyInto(out *User) {
	*out = *u
	out.TypeMeta = u.TypeMeta
	u.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if u.Spec.PasswordSecretRef != nil {
		ref := *u.Spec.PasswordSecretRef
		out.Spec.PasswordSecretRef = &ref
	}
	if a := u.Spec.Authorization; a != nil {
		cp := UserAuthorization{Type: a.Type}
		if a.ACLs != nil {
			cp.ACLs = make([]ACLRule, len(a.ACLs))
			for i, r := range a.ACLs {
				r.Operations = slices.Clone(r.Operations)
				cp.ACLs[i] = r
			}
		}
		out.Spec.Authorization = &cp
	}
	if q := u.Spec.Quotas; q != nil {
		out.Spec.Quotas = &UserQuotas{ProducerByteRate: cloneInt64(q.ProducerByteRate),
			ConsumerByteRate: cloneInt64(q.ConsumerByteRate), RequestPercentage: cloneInt64(q.RequestPercentage)}
	}
	u.Status.DeepCopyInto(&out.Status)
}

func cloneInt64(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// DeepCopyInto copies s into out.
func (s *UserStatus) DeepCopyInto(out *UserStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

// DeepCopy returns a copy of s.
func (s *UserStatus) DeepCopy() *UserStatus {
	if s == nil {
		return nil
	}
	out := new(UserStatus)
	s.DeepCopyInto(out)
	return out
}

// DeepCopy returns a copy of u.
func (u *User) DeepCopy() *User {
	if u == nil {
		return nil
	}
	out := new(User)
	u.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (u *User) DeepCopyObject() runtime.Object { return u.DeepCopy() }

// DeepCopyInto copies l into out.
func (l *UserList) DeepCopyInto(out *UserList) {
	*out = *l
	out.TypeMeta = l.TypeMeta
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]User, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l.
func (l *UserList) DeepCopy() *UserList {
	if l == nil {
		return nil
	}
	out := new(UserList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *UserList) DeepCopyObject() runtime.Object { return l.DeepCopy() }

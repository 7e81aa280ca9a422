package wire

import (
	"errors"

	"github.com/kaas-dev/kaas/engine/auth"
)

// maxScramUsers bounds the users one DescribeUserScramCredentials names
// and the alterations one AlterUserScramCredentials carries: each costs
// reads and writes on the control-plane volume, and no administrator
// changes more users than this at once.
const maxScramUsers = 1000

// scramMechanisms is Kafka's numbering of the SCRAM mechanisms in
// DescribeUserScramCredentials and AlterUserScramCredentials (0 is
// UNKNOWN), in Kafka's order.
var scramMechanisms = []struct {
	typ  int8
	mech auth.Mechanism
}{
	{1, auth.ScramSHA256},
	{2, auth.ScramSHA512},
}

// scramMechanismOf is the mechanism Kafka numbers typ.
func scramMechanismOf(typ int8) (auth.Mechanism, bool) {
	for _, m := range scramMechanisms {
		if m.typ == typ {
			return m.mech, true
		}
	}
	return auth.Mechanism{}, false
}

// scramMechanismType is Kafka's number for the mechanism called name, 0
// (UNKNOWN) when there is none.
func scramMechanismType(name string) int8 {
	for _, m := range scramMechanisms {
		if m.mech.Name == name {
			return m.typ
		}
	}
	return 0
}

// kafkaRefusal refuses with code and Kafka's own message for it, worded
// and capitalized as Kafka words it.
func kafkaRefusal(code int16, msg string) error {
	return &codedError{code: code, err: errors.New(msg)}
}

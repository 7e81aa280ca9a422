// Package envdefault gives the kaas commands' flags their defaults from the
// environment (KAAS_*), so a container sets them with env vars and a flag
// on the command line still wins.
//
// A variable's value goes through the flag itself (flag.FlagSet.Set), so
// it is parsed exactly as the same value on the command line would be, and
// a value the flag refuses is an error that names the variable: a typo in
// a manifest stops the process at start instead of running it on a
// default (KAAS_BROKER_ID=abc must not make every pod broker 0).
package envdefault

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"time"
)

// Vars maps flag names to the environment variables that give them their
// defaults.
type Vars map[string]string

// Error is an environment variable whose value its flag refused.
type Error struct {
	Var, Value string
	Flag       string
	Reason     string // a few words: "not an integer"
	Err        error  // the flag's own error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s=%q: %s (the environment equivalent of --%s)", e.Var, e.Value, e.Reason, e.Flag)
}

func (e *Error) Unwrap() error { return e.Err }

// reason says in a few words why a flag refused a value. The flag
// package's own values (int, bool, duration...) only say "parse error" or
// "value out of range"; what was expected follows from the flag's type.
func reason(f *flag.Flag, err error) string {
	switch err.Error() {
	case "value out of range":
		return "out of range"
	case "parse error":
	default:
		return err.Error()
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return "not valid"
	}
	switch g.Get().(type) {
	case bool:
		return "not a boolean (true or false)"
	case time.Duration:
		return "not a duration (a number with a unit: 250ms, 2s, 5m)"
	case int, int64, uint, uint64:
		return "not an integer"
	case float64:
		return "not a number"
	}
	return "not valid"
}

// Parse parses args into fs, then sets every flag of vars that args did
// not set from its environment variable, when that is set (even to the
// empty string: a variable that is there but empty, as a downward-API
// reference to a missing label gives, is a value like any other). The
// value is set through the flag itself; an error names the variable.
//
// Parse returns the flag package's errors as they are (flag.ErrHelp
// included). It panics when vars names a flag fs does not define: that is
// a mistake in the command, not in its environment.
func Parse(fs *flag.FlagSet, args []string, vars Vars) (Sources, error) {
	src := Sources{fs: fs, fromEnv: map[string][2]string{}}
	for name := range vars {
		if fs.Lookup(name) == nil {
			panic("envdefault: no flag --" + name + " for " + vars[name])
		}
	}
	if err := fs.Parse(args); err != nil {
		return src, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	sort.Strings(names) // the first error is the same every time
	for _, name := range names {
		if given[name] {
			continue
		}
		v, ok := os.LookupEnv(vars[name])
		if !ok {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return src, &Error{Var: vars[name], Value: v, Flag: name, Reason: reason(fs.Lookup(name), err), Err: err}
		}
		src.fromEnv[name] = [2]string{vars[name], v}
	}
	return src, nil
}

// Sources remembers which flags took their value from the environment, so
// that a check of the values after parsing can name where a bad one came
// from.
type Sources struct {
	fs      *flag.FlagSet
	fromEnv map[string][2]string // flag name -> variable, value
}

// Origin names flag name and its value as the user gave it:
// KAAS_BROKER_ID="-1" when it came from the environment, --id=-1 when from
// the command line or the default.
func (s Sources) Origin(name string) string {
	f := s.fs.Lookup(name)
	if f == nil {
		return "--" + name
	}
	if e, ok := s.fromEnv[name]; ok {
		return fmt.Sprintf("%s=%q", e[0], e[1])
	}
	return "--" + name + "=" + f.Value.String()
}

// Invalid is the error of a flag whose value parsed but is out of its
// range, naming where the value came from: KAAS_LEASE="100ms": must be
// longer than --heartbeat-interval (200ms).
func (s Sources) Invalid(name, must string) error {
	return fmt.Errorf("%s: %s", s.Origin(name), must)
}

package auth

import (
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrPrincipalRules refuses a --tls-principal-mapping-rules value.
var ErrPrincipalRules = errors.New("invalid principal mapping rules")

// PrincipalRules map a client certificate's subject to a principal name,
// in the syntax of Kafka's ssl.principal.mapping.rules: a comma- or
// newline-separated list of RULE:pattern/replacement/[LU] and DEFAULT,
// tried in order. A rule applies when its pattern matches the whole
// subject (RFC 2253 form, "CN=app,OU=eng,O=acme"); its replacement names
// the principal ($1 for a group), lowercased with L or uppercased with U.
// DEFAULT gives the whole subject. No rules at all give the subject's CN,
// kaas's default.
type PrincipalRules struct {
	rules []principalRule
}

type principalRule struct {
	isDefault   bool
	pattern     *regexp.Regexp
	replacement string
	caseFold    byte // 0, 'L' or 'U'
}

// ParsePrincipalRules reads a rules value; an empty one is kaas's default.
func ParsePrincipalRules(s string) (PrincipalRules, error) {
	var out PrincipalRules
	rest := strings.TrimSpace(s)
	for rest != "" {
		var r principalRule
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			r.isDefault = true
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			var pattern, replacement string
			var ok bool
			pattern, rest, ok = cutUnescaped(rest[len("RULE:"):])
			if !ok {
				return PrincipalRules{}, fmt.Errorf("%w: a RULE needs pattern/replacement/", ErrPrincipalRules)
			}
			replacement, rest, ok = cutUnescaped(rest)
			if !ok {
				return PrincipalRules{}, fmt.Errorf("%w: a RULE needs pattern/replacement/", ErrPrincipalRules)
			}
			if rest != "" && (rest[0] == 'L' || rest[0] == 'U') {
				r.caseFold, rest = rest[0], rest[1:]
			}
			re, err := regexp.Compile("^(?:" + pattern + ")$")
			if err != nil {
				return PrincipalRules{}, fmt.Errorf("%w: pattern %q: %v", ErrPrincipalRules, pattern, err)
			}
			r.pattern, r.replacement = re, javaGroups.ReplaceAllString(replacement, "$${$1}")
		default:
			return PrincipalRules{}, fmt.Errorf("%w: %q is neither RULE:pattern/replacement/[LU] nor DEFAULT", ErrPrincipalRules, rest)
		}
		rest = strings.TrimLeft(rest, " \t")
		if rest != "" {
			if rest[0] != ',' && rest[0] != '\n' {
				return PrincipalRules{}, fmt.Errorf("%w: %q after a rule", ErrPrincipalRules, rest)
			}
			rest = strings.TrimSpace(rest[1:])
		}
		out.rules = append(out.rules, r)
	}
	return out, nil
}

// javaGroups finds Java's $n group references, which Go spells ${n} when
// a name character follows.
var javaGroups = regexp.MustCompile(`\$(\d+)`)

// cutUnescaped cuts s at its first '/' not escaped as "\/", and unescapes
// the part before it.
func cutUnescaped(s string) (before, after string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '/':
			b.WriteByte('/')
			i++
		case s[i] == '/':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}

// Principal names the client whose certificate has subject. It fails when
// rules are given and none applies, as Kafka refuses such a client.
func (p PrincipalRules) Principal(subject pkix.Name) (string, error) {
	if len(p.rules) == 0 {
		if subject.CommonName == "" {
			return "", errors.New("the client certificate's subject has no CN")
		}
		return subject.CommonName, nil
	}
	dn := subject.String()
	for _, r := range p.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.pattern.MatchString(dn) {
			continue
		}
		name := r.pattern.ReplaceAllString(dn, r.replacement)
		switch r.caseFold {
		case 'L':
			name = strings.ToLower(name)
		case 'U':
			name = strings.ToUpper(name)
		}
		return name, nil
	}
	return "", fmt.Errorf("no principal mapping rule applies to %q", dn)
}

package warmerctl

import (
	"strings"
	"sync"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/vocabulary"
)

// Words is what the reference says of one reason: what it means and what
// to do.
type Words struct {
	Meaning string `json:"meaning"`
	Action  string `json:"action,omitempty"`
}

// reasons are the reasons' words by value, read once from conditions.go.
var reasons = sync.OnceValue(func() map[string]Words {
	groups, err := vocabulary.Parse("conditions.go", warmv1.ConditionsSource)
	if err != nil {
		// conditions.go compiles, and its tests parse it: a failure here
		// is a broken build, not a user's problem.
		panic(err)
	}
	out := map[string]Words{}
	plain := vocabulary.Replacer(groups, func(v string) string { return v })
	for _, g := range groups {
		for _, c := range g.Consts {
			if !strings.HasPrefix(c.Ident, "Reason") {
				continue
			}
			if _, dup := out[c.Value]; !dup {
				out[c.Value] = Words{Meaning: sentence(plain.Replace(c.Meaning())), Action: sentence(plain.Replace(c.Action()))}
			}
		}
	}
	return out
})

// ReasonWords is what the reference says of a reason; ok is false for a
// reason it does not know (an agent newer than this plugin).
func ReasonWords(reason string) (Words, bool) {
	w, ok := reasons()[reason]
	return w, ok
}

// sentence starts s with a capital letter.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

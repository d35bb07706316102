package kept_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/goloom/loom/exporters/internal/kept"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A name read at every scrape is made once and kept; a name a scrape does not read is forgotten
// at its end, and made again if read later.
func TestNamesKeepWhatIsReadAndForgetTheRest(t *testing.T) {
	var names kept.Names[*int]
	made := 0
	get := func(name string) *int {
		return names.Get(kept.Key{Label: "limiter", Name: name}, func() *int { made++; v := made; return &v })
	}
	names.Begin()
	a, b := get("a"), get("b")
	assert.Same(t, a, get("a"), "read twice in one scrape: made once")
	names.End()
	assert.Equal(t, 2, made)

	names.Begin()
	assert.Same(t, a, get("a"), "kept from the last scrape")
	names.End()
	assert.ElementsMatch(t, []kept.Key{{Label: "limiter", Name: "a"}}, names.Keys(), "b, unread, is forgotten")

	names.Begin()
	assert.NotSame(t, b, get("b"), "made again")
	assert.Equal(t, 3, made)
	names.End()
	assert.ElementsMatch(t, []kept.Key{{Label: "limiter", Name: "b"}}, names.Keys())
}

// One name of two families is two keys.
func TestNamesKeyIsLabelAndName(t *testing.T) {
	var names kept.Names[string]
	names.Begin()
	assert.Equal(t, "l", names.Get(kept.Key{Label: "limiter", Name: "x"}, func() string { return "l" }))
	assert.Equal(t, "s", names.Get(kept.Key{Label: "semaphore", Name: "x"}, func() string { return "s" }))
	names.End()
	assert.Len(t, names.Keys(), 2)
}

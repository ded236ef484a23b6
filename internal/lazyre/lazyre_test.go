package lazyre

import (
	"regexp"
	"sync"
	"testing"
)

func TestFirstUse(t *testing.T) {
	re := New(`^a+b$`)
	if !re().MatchString("aab") || re().MatchString("ab c") {
		t.Fatal("the compiled expression does not match as written")
	}
	if re() != re() {
		t.Fatal("compiled twice")
	}
}

func TestConcurrentFirstUse(t *testing.T) {
	re := New(`^x[0-9]{3}$`)
	var wg sync.WaitGroup
	got := make([]*regexp.Regexp, 16)
	for i := range got {
		wg.Go(func() { got[i] = re() })
	}
	wg.Wait()
	for _, g := range got {
		if g == nil || g != got[0] || !g.MatchString("x123") {
			t.Fatalf("concurrent first calls: %v", got)
		}
	}
}

func TestInvalidPanicsAtFirstUse(t *testing.T) {
	re := New(`(`) // no panic here
	defer func() {
		if recover() == nil {
			t.Fatal("an invalid expression did not panic at its first use")
		}
	}()
	re()
}

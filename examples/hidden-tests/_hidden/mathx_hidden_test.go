package mathx

import "testing"

// Tests the model never sees: other inputs than the visible test's.
func TestAbsNegatives(t *testing.T) {
	for _, x := range []int{-1, -8, -250} {
		if got := Abs(x); got != -x {
			t.Errorf("Abs(%d) = %d, want %d", x, got, -x)
		}
	}
}

func TestAbsZeroAndPositives(t *testing.T) {
	for _, x := range []int{0, 1, 99} {
		if got := Abs(x); got != x {
			t.Errorf("Abs(%d) = %d, want %d", x, got, x)
		}
	}
}

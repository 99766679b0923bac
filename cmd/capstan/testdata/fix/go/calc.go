// Package calc is the fixture of the fix-failing-test example: Add has a bug.
package calc

// Add returns the sum of a and b.
func Add(a, b int) int {
	return a - b
}

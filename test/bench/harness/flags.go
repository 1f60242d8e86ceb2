package harness

import (
	"fmt"
	"strconv"
	"strings"
)

// Ints is a flag.Value of comma-separated positive whole numbers, such as a
// benchmark's sizes: -n 100,1000,5000.
type Ints []int

func (v *Ints) String() string {
	parts := make([]string, len(*v))
	for i, n := range *v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (v *Ints) Set(s string) error {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return fmt.Errorf("not a positive whole number: %q", part)
		}
		out = append(out, n)
	}
	*v = out
	return nil
}

// Floats is a flag.Value of comma-separated positive numbers, such as the
// client rates to compare: -qps 100,400.
type Floats []float64

func (v *Floats) String() string {
	parts := make([]string, len(*v))
	for i, f := range *v {
		parts[i] = strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (v *Floats) Set(s string) error {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || f <= 0 {
			return fmt.Errorf("not a positive number: %q", part)
		}
		out = append(out, f)
	}
	*v = out
	return nil
}

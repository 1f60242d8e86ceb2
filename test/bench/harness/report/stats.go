package report

import (
	"math"
	"slices"
	"strconv"
)

// Summary is the median of repeated runs and their spread.
type Summary struct {
	Median, Min, Max float64
	// Runs is the number of values summarised; zero means no value.
	Runs int
}

// Summarize returns the median, min and max of values (NaNs ignored). With
// an even count the median is the mean of the two middle values.
func Summarize(values []float64) Summary {
	v := make([]float64, 0, len(values))
	for _, x := range values {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Summary{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	slices.Sort(v)
	mid := len(v) / 2
	median := v[mid]
	if len(v)%2 == 0 {
		median = (v[mid-1] + v[mid]) / 2
	}
	return Summary{Median: median, Min: v[0], Max: v[len(v)-1], Runs: len(v)}
}

// Format writes the median with prec decimals and, for more than one run,
// the spread: "48.2 (46.1–50.3)".
func (s Summary) Format(prec int) string {
	if s.Runs == 0 {
		return "–"
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	if s.Runs == 1 {
		return f(s.Median)
	}
	return f(s.Median) + " (" + f(s.Min) + "–" + f(s.Max) + ")"
}

// Package report turns repeated benchmark runs into figures: the median of
// the runs with their min-max spread, and tables printed as aligned text
// for the terminal and as Markdown for results files.
package report

package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Table is a titled grid of cells, printed the same way to the terminal and
// to a results file.
type Table struct {
	Columns []string
	Rows    [][]string
}

// Add appends a row; missing cells print empty, extra ones are an error at
// print time.
func (t *Table) Add(cells ...string) {
	t.Rows = append(t.Rows, cells)
}

func (t *Table) check() error {
	for i, r := range t.Rows {
		if len(r) > len(t.Columns) {
			return fmt.Errorf("row %d has %d cells for %d columns", i, len(r), len(t.Columns))
		}
	}
	return nil
}

func (t *Table) cells(r []string) []string {
	out := make([]string, len(t.Columns))
	copy(out, r)
	return out
}

// WriteText writes the table with aligned columns.
func (t *Table) WriteText(w io.Writer) error {
	if err := t.check(); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.Columns, "\t"))
	for _, r := range t.Rows {
		fmt.Fprintln(tw, strings.Join(t.cells(r), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("failed to write the table: %w", err)
	}
	return nil
}

// WriteMarkdown writes the table as a GitHub Markdown table.
func (t *Table) WriteMarkdown(w io.Writer) error {
	if err := t.check(); err != nil {
		return err
	}
	row := func(cells []string) string {
		escaped := make([]string, len(cells))
		for i, c := range cells {
			escaped[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		return "| " + strings.Join(escaped, " | ") + " |\n"
	}
	var b strings.Builder
	b.WriteString(row(t.Columns))
	seps := make([]string, len(t.Columns))
	for i := range seps {
		seps[i] = "---"
	}
	b.WriteString(row(seps))
	for _, r := range t.Rows {
		b.WriteString(row(t.cells(r)))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("failed to write the table: %w", err)
	}
	return nil
}

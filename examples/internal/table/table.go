// Package table prints the examples' result tables: columns aligned with
// text/tabwriter, two spaces apart.
package table

import (
	"io"
	"strings"
	"text/tabwriter"
)

// Print writes rows to w, one line each, with the cells of a column left
// aligned; a row may have fewer cells than the others.
func Print(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range rows {
		if _, err := io.WriteString(tw, strings.Join(row, "\t")+"\n"); err != nil {
			return err
		}
	}
	return tw.Flush()
}

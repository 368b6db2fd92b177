package poolreport

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes rows as the table `kubectl rota pool` prints.
func WriteTable(w io.Writer, rows []GPU) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tDEVICE\tMODEL\tUUID\tHEALTH\tRESERVATION\tHOLDER\tVRAM MiB")
	for _, r := range rows {
		holder := "-"
		if len(r.Holders) > 0 {
			holder = strings.Join(r.Holders, ",")
		}
		vram := "-"
		if r.Shared {
			vram = fmt.Sprintf("%d/%d", r.VRAMUsedMiB, r.VRAMMiB)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Node, r.Device, dash(r.Model), dash(r.UUID), r.Health, dash(r.Reservation), holder, vram)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

package cdi

import (
	"fmt"
	"os"
	"strings"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
)

// Claims returns the UIDs of the claims that have a spec in the directory,
// read from the spec files' names (SpecName). Files of other kinds are
// ignored.
func (w *Writer) Claims() ([]string, error) {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return nil, fmt.Errorf("listing CDI specs in %s: %w", w.dir, err)
	}
	prefix := cdiapi.GenerateSpecName(Vendor, Class) + "_"
	var uids []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		if uid, ok := strings.CutPrefix(name, prefix); ok && uid != "" {
			uids = append(uids, uid)
		}
	}
	return uids, nil
}

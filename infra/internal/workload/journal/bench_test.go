package journal_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/journal"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// BenchmarkRestore reports what serving one cluster again after a clean
// restart costs in reading its journal and building its store: 300 objects of
// about 1 KiB, the size of test/bench/workload's cluster with its addon
// set (about 290 KiB of journal).
func BenchmarkRestore(b *testing.B) {
	path := filepath.Join(b.TempDir(), "ns", "c.journal")
	j, restored, err := journal.Open(journal.Options{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	s := store.New(store.Options{Restored: restored, Journal: j})
	value := strings.Repeat("x", 1024)
	for i := range 300 {
		if _, err := s.Create(configMaps, configMap("cm-"+strconv.Itoa(i), value)); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		j, restored, err := journal.Open(journal.Options{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		s := store.New(store.Options{Restored: restored, Journal: j})
		// Closing, which compacts the file, belongs to the stop before.
		b.StopTimer()
		s.Close()
		if err := j.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

package progress_test

import (
	"bytes"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/dev/progress"
)

func TestStepPrintsStartAndOutcome(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	d := progress.New(&out)
	d.Step("etcd")(nil)
	d.Step("core")(errors.New("boom"))
	g.Expect(out.String()).To(MatchRegexp(`(?s)• etcd \.\.\..*✓ etcd \(\d+(\.\d+)?m?s\).*• core \.\.\..*✗ core failed after .*: boom`))
}

func TestQuietDisplayPrintsNothing(t *testing.T) {
	g := NewWithT(t)
	d := progress.New(nil)
	d.Step("etcd")(nil)
	d.Printf("x")
	var none *progress.Display
	none.Step("y")(nil)
	g.Expect(d.Elapsed()).To(BeNumerically(">=", 0))
}

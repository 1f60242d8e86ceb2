package memstat

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestParseReadsPeakAndCurrentInBytes(t *testing.T) {
	g := NewWithT(t)
	s, err := parse([]byte("Name:\tbench\nVmPeak:\t  900 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nThreads:\t4\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(Equal(Status{Peak: 2048 * 1024, Current: 1024 * 1024}))
}

func TestParseFailsWithoutBothFields(t *testing.T) {
	g := NewWithT(t)
	_, err := parse([]byte("Name:\tbench\nVmRSS:\t 1024 kB\n"))
	g.Expect(err).To(MatchError(ContainSubstring("VmHWM")))
}

func TestParseFailsOnAnUnknownUnit(t *testing.T) {
	g := NewWithT(t)
	_, err := parse([]byte("VmHWM:\t 1 MB\nVmRSS:\t 1 kB\n"))
	g.Expect(err).To(HaveOccurred())
}

func TestReadAndSamplerSeeThisProcess(t *testing.T) {
	g := NewWithT(t)
	s, err := Read()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Current).To(BeNumerically(">", 0))
	g.Expect(s.Peak).To(BeNumerically(">=", s.Current))

	sampler := StartSampler(time.Millisecond)
	peak, err := sampler.Stop()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(peak).To(BeNumerically(">", 0))
}

func TestParseAvailableReadsMemAvailableInBytes(t *testing.T) {
	g := NewWithT(t)
	b, err := parseAvailable([]byte("MemTotal:       24684084 kB\nMemFree:        1000 kB\nMemAvailable:   2048 kB\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b).To(Equal(uint64(2048 * 1024)))

	_, err = parseAvailable([]byte("MemTotal:       24684084 kB\n"))
	g.Expect(err).To(MatchError(ContainSubstring("MemAvailable")))
}

func TestAvailableSeesThisMachine(t *testing.T) {
	g := NewWithT(t)
	b, err := Available()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b).To(BeNumerically(">", 0))
}

func TestMiBHasOneDecimal(t *testing.T) {
	NewWithT(t).Expect(MiB(3 << 19)).To(Equal("1.5"))
}

package sandbox

import (
	"strings"
	"testing"

	"github.com/rota-dev/rota/pkg/advisor"
)

// The unblock advice at other sizes than the fragmentation scenario's
// (docs/design.md#scenario-fragmentation; the advice-*.yaml
// scenarios): each checkpoint's adviceContains names the expected option;
// here the first option's kind is checked as well, since the advice is
// ordered.
func TestScenarioAdvice(t *testing.T) {
	for name, want := range map[string]struct {
		checkpoint string
		kind       advisor.Kind
	}{
		"advice-3x4":   {"t2-fragmented-advice", advisor.KindMove},
		"advice-quota": {"t2-quota-advice", advisor.KindQuota},
		"advice-wait":  {"mon-0905-wait-advice", advisor.KindWait},
	} {
		t.Run(name, func(t *testing.T) {
			rep := playScenario(t, name)
			for _, p := range checkpoint(t, rep, want.checkpoint).Pods {
				if !strings.HasPrefix(p.Name, "team-b/") {
					continue
				}
				if p.Waiting == nil || len(p.Waiting.Advice) == 0 || p.Waiting.Advice[0].Kind != want.kind {
					t.Errorf("%s: %s's advice %+v, want a %s option first", want.checkpoint, p.Name, p.Waiting, want.kind)
				}
			}
		})
	}
}

package advisor

// DefaultMaxChecks bounds the move search when Options.MaxChecks is 0.
const DefaultMaxChecks = 50000

// Advisor advises waiting workloads in one snapshot, which it indexes
// once: advising several pods of one moment costs one index.
type Advisor struct {
	ix *index
}

// New indexes snap. The advisor only reads snap; snap must not change
// while the advisor is in use.
func New(snap *Snapshot) *Advisor {
	return &Advisor{ix: newIndex(snap)}
}

// Advise returns the options that would admit unit in snap; see
// Advisor.Advise.
func Advise(snap *Snapshot, unit *Workload, opts Options) Advice {
	return New(snap).Advise(unit, opts)
}

// Advise returns the options that would admit unit, a waiting pod or gang,
// ordered: tier (no one disturbed, the owner widens the claim), quota (an
// admin raises a limit), move plans (cheapest first), wait (the earliest
// release that frees enough), and none alone when nothing else applies. A
// unit that fits now gets no options: its next attempt places it.
func (a *Advisor) Advise(unit *Workload, opts Options) Advice {
	ix := a.ix
	if opts.MaxChecks <= 0 {
		opts.MaxChecks = DefaultMaxChecks
	}
	if opts.MaxPlans <= 0 {
		opts.MaxPlans = 3
	}
	adv := Advice{Workload: unit.Key, Options: []Option{}}
	if len(unit.Groups) == 0 {
		return adv
	}
	if _, ok := ix.now().fits(unit); ok {
		return adv
	}
	adv.Options = append(adv.Options, tierOptions(ix, unit)...)
	q, quotaBlocks := quotaOption(ix, unit)
	if quotaBlocks {
		adv.Options = append(adv.Options, q)
	}
	s := &searcher{ix: ix, unit: unit, maxChecks: opts.MaxChecks}
	if !quotaBlocks {
		for _, p := range s.movePlans(opts.MaxPlans) {
			adv.Options = append(adv.Options, s.option(p))
		}
	}
	if o, ok := waitOption(ix, unit); ok {
		adv.Options = append(adv.Options, o)
	}
	adv.Checks, adv.Truncated = s.checks, s.truncated
	if len(adv.Options) == 0 && !adv.Truncated {
		adv.Options = append(adv.Options, noneOption(ix, unit))
	}
	return adv
}

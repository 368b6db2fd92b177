package waits

import (
	"context"
	"strings"
	"sync"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// Candidates are the devices of one slice view that a tier's selectors
// accept, node by node, and what the selectors reject, summed. Which
// devices a selector accepts depends only on the published slices, so a
// waiting pod's counts need not evaluate a selector again, nor visit a
// node without a matching device, until the slices change (CandidateCache).
// Read only once built.
type Candidates struct {
	// Nodes are the nodes with a matching device, in the view's order.
	Nodes []string
	// ByNode are each of those nodes' matching devices, in the view's order.
	ByNode map[string][]gpupool.NodeDevice
	// Rejecting are, for each node of the view without a matching device,
	// the first selector that rejected one of its devices ("" when it has
	// none) and its devices' models: what Tiering says of such a node.
	Rejecting map[string]NodeRejection
	// Err is the first selector error (a selector that does not compile).
	Err error
	// name is the model of the first matching device ("" for none).
	name string
	// otherModel and unmet are TierCounts.OtherModel and Unmet.
	otherModel int
	unmet      map[string]int
}

// NodeRejection is what a tier's selectors say of a node none of whose
// devices they accept.
type NodeRejection struct {
	// FirstFailing is the selector that rejected the node's first device
	// (as gpupool.Matcher.FirstFailing names it).
	FirstFailing string
	// Models are the models of the node's devices.
	Models map[string]bool
}

// FindCandidates evaluates m on every node-local device of slices, once.
func FindCandidates(ctx context.Context, slices *gpupool.Slices, m *gpupool.Matcher) *Candidates {
	c := &Candidates{ByNode: map[string][]gpupool.NodeDevice{}, Rejecting: map[string]NodeRejection{}}
	var rejected []rejectedDevice
	models := map[string]bool{}
	for _, node := range slices.Nodes {
		nr := NodeRejection{Models: map[string]bool{}}
		for _, nd := range slices.ByNode[node] {
			driver := nd.ID.Driver.String()
			model := gpupool.StringAttribute(nd.Device, driver, gpuv1.AttributeModel)
			nr.Models[model] = true
			if failing, err := m.FirstFailing(ctx, driver, nd.Device); err != nil || failing != "" {
				if err != nil && c.Err == nil {
					c.Err = err
				}
				if nr.FirstFailing == "" {
					nr.FirstFailing = failing
				}
				if err == nil && !strings.HasPrefix(failing, gpupool.ClassSelectorPrefix) {
					rejected = append(rejected, rejectedDevice{model: model, selector: failing})
				}
				continue
			}
			if model != "" && len(models) == 0 {
				c.name = model
			}
			models[model] = true
			if _, seen := c.ByNode[node]; !seen {
				c.Nodes = append(c.Nodes, node)
			}
			c.ByNode[node] = append(c.ByNode[node], nd)
		}
		if _, matched := c.ByNode[node]; !matched {
			c.Rejecting[node] = nr
		}
	}
	var tc TierCounts
	tc.Name = c.name
	tc.countRejected(rejected, models)
	c.name, c.otherModel, c.unmet = tc.Name, tc.OtherModel, tc.Unmet
	return c
}

// maxCachedCandidates bounds a CandidateCache: distinct selector sets
// among the pods that wait at one time. Past it, the cache starts over.
const maxCachedCandidates = 256

// CandidateCache keeps the Candidates of each matcher (by its Key) for the
// last slice view seen; a new view empties it. The zero value is ready to
// use; a nil cache finds the candidates every time.
type CandidateCache struct {
	mu    sync.Mutex
	view  *gpupool.Slices
	byKey map[string]*Candidates
}

// Get returns the candidates of m in slices, finding them on first use.
func (c *CandidateCache) Get(ctx context.Context, slices *gpupool.Slices, m *gpupool.Matcher) *Candidates {
	if c == nil {
		return FindCandidates(ctx, slices, m)
	}
	key := m.Key()
	c.mu.Lock()
	if c.view != slices || len(c.byKey) >= maxCachedCandidates {
		c.view, c.byKey = slices, map[string]*Candidates{}
	}
	if found, ok := c.byKey[key]; ok {
		c.mu.Unlock()
		return found
	}
	c.mu.Unlock()
	// Evaluated outside the lock: two cycles finding the same candidates
	// at once compute the same answer.
	found := FindCandidates(ctx, slices, m)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view == slices {
		c.byKey[key] = found
	}
	return found
}

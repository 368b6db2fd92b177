package forecast

import (
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// WithoutReserved returns the slices less the GPUs the reservations hold:
// those the status lists, else (a reservation not bound yet) the ones its
// spec asks for by UUID, else its count of the node's GPUs in index order.
// Reserved GPUs serve only their members, so the forecast leaves them and
// their members out of the pool's count.
func WithoutReserved(slices []*resourceapi.ResourceSlice, reservations []*v1alpha1.GPUReservation) []*resourceapi.ResourceSlice {
	held := sets.New[string]() // "node/device"
	view := gpupool.NewSlices(slices)
	for _, res := range reservations {
		devs := view.ByNode[res.Spec.NodeName]
		uuids := sets.New(res.Spec.DeviceUUIDs...)
		for _, d := range res.Status.Devices {
			uuids.Insert(d.UUID)
		}
		if uuids.Len() > 0 {
			for _, nd := range devs {
				if uuids.Has(gpupool.StringAttribute(nd.Device, nd.ID.Driver.String(), gpuv1.AttributeUUID)) {
					held.Insert(res.Spec.NodeName + "/" + nd.Device.Name)
				}
			}
			continue
		}
		if res.Spec.Count == nil {
			continue
		}
		byIndex := append([]gpupool.NodeDevice(nil), devs...)
		sort.SliceStable(byIndex, func(i, j int) bool { return index(byIndex[i]) < index(byIndex[j]) })
		n := int(*res.Spec.Count)
		for _, nd := range byIndex {
			key := res.Spec.NodeName + "/" + nd.Device.Name
			if n == 0 {
				break
			}
			if !held.Has(key) {
				held.Insert(key)
				n--
			}
		}
	}
	if held.Len() == 0 {
		return slices
	}
	out := make([]*resourceapi.ResourceSlice, 0, len(slices))
	for _, s := range slices {
		if s.Spec.NodeName == nil {
			out = append(out, s)
			continue
		}
		c := s.DeepCopy()
		c.Spec.Devices = c.Spec.Devices[:0]
		for _, d := range s.Spec.Devices {
			if !held.Has(*s.Spec.NodeName + "/" + d.Name) {
				c.Spec.Devices = append(c.Spec.Devices, d)
			}
		}
		out = append(out, c)
	}
	return out
}

func index(nd gpupool.NodeDevice) int64 {
	if a, ok := nd.Device.Attributes[gpuv1.AttributeIndex]; ok && a.IntValue != nil {
		return *a.IntValue
	}
	return 1 << 62
}

package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// ruleName is the DeviceTaintRule for one held device: readable where the
// names allow it, hashed where they would pass the 253-character limit.
func ruleName(res *rotav1.GPUReservation, pool, device string) string {
	name := fmt.Sprintf("rota-%s-%s-%s", res.Namespace, res.Name, device)
	if len(name) <= 253 && !strings.Contains(pool, "/") {
		return name
	}
	sum := sha256.Sum256([]byte(res.Namespace + "/" + res.Name + "/" + pool + "/" + device))
	return "rota-" + hex.EncodeToString(sum[:12])
}

// taintRule is the DeviceTaintRule that holds one device for res.
func taintRule(res *rotav1.GPUReservation, pool, device string) *resourceapi.DeviceTaintRule {
	return &resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{
			Name:   ruleName(res, pool, device),
			Labels: map[string]string{gpuv1.ReservationNamespaceLabel: res.Namespace, gpuv1.ReservationNameLabel: res.Name},
		},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{
				Driver: ptr.To(gpuv1.DriverName),
				Pool:   ptr.To(pool),
				Device: ptr.To(device),
			},
			Taint: resourceapi.DeviceTaint{
				Key:    gpuv1.ReservedTaintKey,
				Value:  gpuv1.ReservedTaintValue(res.Namespace, res.Name),
				Effect: resourceapi.DeviceTaintEffectNoSchedule,
			},
		},
	}
}

package gpu

// XID classes. NVIDIA documents which XIDs are caused by the application
// (bad memory access, user-initiated reset) and which mean the GPU itself is in
// trouble. Application XIDs do not make a GPU unhealthy; they are published as
// an informational (effect None) taint so operators still see them.
const (
	xidFallenOffBus = 79
)

// applicationXIDs are caused by the workload, not the hardware.
var applicationXIDs = map[uint64]bool{
	13: true, // graphics engine exception (often an out-of-range access)
	31: true, // GPU memory page fault
	43: true, // GPU stopped processing (application)
	45: true, // preemptive cleanup after an earlier error
	68: true, // video processor exception
}

// eccXIDs report memory errors; the mock raises the ECC counter for them.
var eccXIDs = map[uint64]bool{48: true, 63: true, 64: true, 92: true, 94: true, 95: true}

// IsApplicationXID reports whether xid is caused by the application.
func IsApplicationXID(xid uint64) bool { return applicationXIDs[xid] }

// IsGPULostXID reports whether xid means the GPU fell off the bus.
func IsGPULostXID(xid uint64) bool { return xid == xidFallenOffBus }

func isECCXID(xid uint64) bool { return eccXIDs[xid] }

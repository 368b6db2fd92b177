package guarantees

import (
	"os"
	"testing"

	"github.com/rota-dev/rota/test/integration/framework"
)

// TestMain removes the binaries the package's tests built.
func TestMain(m *testing.M) { os.Exit(framework.RunTests(m)) }

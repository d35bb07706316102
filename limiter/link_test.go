package limiter_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// "A program that uses no fleet option links no fleet code": the fleet's admission steps are
// reached only through the steps New builds from WithFleet and WithFleetRate, so a program that
// calls neither links none of package fleet's functions — only the package's initialization
// (its error values), which importing it brings whatever the limiter does. Regression: a 4-line
// program using only limiter.Do linked 65 of fleet's symbols (21 KB) through the call path. The
// control, a program that uses WithFleet, must link them, or this test proves nothing.
func TestPlainProgramLinksNoFleetCode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	fleetCode := func(program string) []string {
		t.Helper()
		bin := filepath.Join(t.TempDir(), program)
		out, err := exec.Command(goTool, "build", "-o", bin, "./testdata/"+program).CombinedOutput()
		require.NoError(t, err, "%s", out)
		out, err = exec.Command(goTool, "tool", "nm", bin).CombinedOutput()
		require.NoError(t, err, "%s", out)
		var code []string
		for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
			f := strings.Fields(sc.Text()) // address, kind, name
			if len(f) == 3 && f[1] == "T" && strings.HasPrefix(f[2], "github.com/goloom/loom/fleet.") &&
				f[2] != "github.com/goloom/loom/fleet.init" {
				code = append(code, f[2])
			}
		}
		return code
	}
	assert.Empty(t, fleetCode("linkplain"), "fleet functions linked into a program that uses only limiter.Do")
	assert.NotEmpty(t, fleetCode("linkfleet"), "the control: WithFleet links the fleet's code")
}

package workload_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestImportsNoHarness keeps the dependency direction one way: workload is
// handed an executor and imports neither the harness, nor any other noisysim
// package, nor a database driver.
func TestImportsNoHarness(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "github.com/noisysim/") || strings.Contains(imp, "pgx") || imp == "database/sql" {
			t.Errorf("workload imports %s", imp)
		}
	}
}

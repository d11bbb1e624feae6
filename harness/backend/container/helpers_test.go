package container_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/container"
)

// testImage is the image the tests run: $NOISYSIM_TEST_IMAGE or the locally
// built container.LocalTestImage (.ci/pg-image.sh).
func testImage() string {
	if img := os.Getenv("NOISYSIM_TEST_IMAGE"); img != "" {
		return img
	}
	return container.LocalTestImage
}

// buildHint says how to get the local test image.
const buildHint = "build it with .ci/pg-image.sh"

// needImage skips tb when no Docker daemon answers or image is absent.
func needImage(tb testing.TB, image, hint string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := container.Available(ctx); err != nil {
		skipOrFail(tb, "no Docker daemon reachable")
	}
	ok, err := container.ImagePresent(ctx, image)
	if err != nil {
		tb.Fatal(err)
	}
	if !ok {
		if image != testImage() {
			tb.Skipf("skipping: image %s is absent (%s)", image, hint)
		}
		skipOrFail(tb, fmt.Sprintf("image %s is absent (%s)", image, hint))
	}
}

// skipOrFail skips tb saying why, or fails it when $NOISYSIM_REQUIRE_DOCKER
// is 1 (.ci/run sets it where a daemon answers: the tests must run there).
func skipOrFail(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("NOISYSIM_REQUIRE_DOCKER") == "1" {
		tb.Fatalf("NOISYSIM_REQUIRE_DOCKER=1 but %s", why)
	}
	tb.Skip("skipping: " + why)
}

// testLabel marks what this test process creates, so that the leftover
// check ignores other processes' clusters on a shared daemon.
var (
	testLabelValue = strconv.Itoa(os.Getpid())
	testLabel      = container.WithLabel("org.noisysim.test-pid", testLabelValue)
	testSelector   = "org.noisysim.test-pid=" + testLabelValue
)

// runLeft returns how many containers and networks of run id are left.
func runLeft(tb testing.TB, runID string) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cs, ns, err := container.Leftovers(ctx, testSelector)
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, name := range append(cs, ns...) {
		if len(name) >= len("noisysim-")+len(runID) && name[len("noisysim-"):len("noisysim-")+len(runID)] == runID {
			n++
		}
	}
	return n
}

// start starts spec on the test image and closes it at the end of the test.
func start(t *testing.T, spec backend.Spec, opts ...container.Option) *container.Cluster {
	t.Helper()
	needImage(t, testImage(), buildHint)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := container.Start(ctx, spec, append([]container.Option{container.WithImages(testImage()), testLabel}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

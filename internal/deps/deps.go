//go:build tools

package deps

import (
	_ "github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/schollz/progressbar/v3"
	_ "go.uber.org/goleak"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sync/semaphore"
	_ "golang.org/x/sys/unix"
	_ "gonum.org/v1/gonum/stat/distuv"
)

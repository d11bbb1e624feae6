package local

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// stateFile is the file in a cluster directory recording its processes, for
// StopKept and for people.
const stateFile = "state.json"

type clusterState struct {
	Format     int         `json:"format"`
	OwnerPID   int         `json:"owner_pid"`
	Keep       bool        `json:"keep"`
	BinDir     string      `json:"bin_dir"`
	ServerUser string      `json:"server_user"`
	Nodes      []nodeState `json:"nodes"`
}

type nodeState struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Port    int    `json:"port"`
	PID     int    `json:"pid"`
	DataDir string `json:"data_dir"`
}

// writeState records the cluster's processes in its directory, atomically.
func (c *Cluster) writeState() error {
	st := clusterState{Format: 1, OwnerPID: os.Getpid(), Keep: c.keep, BinDir: c.bin.Dir, ServerUser: c.user.name}
	c.mu.Lock()
	for _, n := range c.nodes {
		s := n.stat()
		st.Nodes = append(st.Nodes, nodeState{Name: s.Name, Role: string(s.Role), Port: s.Port, PID: s.PID, DataDir: s.DataDir})
	}
	c.mu.Unlock()
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	tmp := filepath.Join(c.dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, stateFile)); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

func readState(dir string) (clusterState, error) {
	var st clusterState
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return st, fmt.Errorf("read state: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("read state: %w", err)
	}
	return st, nil
}

package local

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// setting is one postgresql.conf parameter.
type setting struct{ name, value string }

// DefaultSettings returns the settings noisysim gives every node before the
// spec's own: fsync is off because clusters are throwaway (a crash of the
// machine may corrupt them; nothing is meant to survive), logging goes to
// the node's server.log (log_line_prefix shows the time, pid and
// application_name). Spec.Settings override these.
func DefaultSettings() map[string]string {
	return map[string]string{
		"fsync":               "off",
		"logging_collector":   "off",
		"log_destination":     "stderr",
		"log_line_prefix":     "%m [%p] %q%a ",
		"wal_level":           "replica",
		"max_wal_senders":     "10",
		"hot_standby":         "on",
		"password_encryption": "scram-sha-256",
	}
}

// reservedSettings are set by noisysim for each node and cannot be overridden.
var reservedSettings = map[string]bool{
	"listen_addresses": true, "port": true, "unix_socket_directories": true,
	"unix_socket_permissions": true, "unix_socket_group": true, "data_directory": true,
	"config_file": true, "hba_file": true, "ident_file": true, "external_pid_file": true,
	"primary_conninfo": true, "primary_slot_name": true, "cluster_name": true,
}

var settingNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// userSettings validates spec settings and returns them sorted by name.
func userSettings(m map[string]string) ([]setting, error) {
	var out []setting
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		name := strings.ToLower(k)
		switch {
		case !settingNameRE.MatchString(k):
			return nil, &SettingError{Name: k, Reason: "not a valid parameter name"}
		case reservedSettings[name]:
			return nil, &SettingError{Name: k, Reason: "set by noisysim for each node; it cannot be overridden"}
		case strings.ContainsAny(v, "\n\r\x00"):
			return nil, &SettingError{Name: k, Reason: "value contains a line break or NUL"}
		}
		out = append(out, setting{name, v})
	}
	return out, nil
}

// quoteConf quotes v as a postgresql.conf string value.
func quoteConf(v string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), `'`, `''`) + "'"
}

// confFile is the file noisysim writes its settings into, included from
// postgresql.conf so that the initdb-generated file stays untouched.
const confFile = "noisysim.conf"

// writeConf writes n's noisysim.conf and makes postgresql.conf include it.
func (n *node) writeConf(port int) error {
	c := n.c
	var b strings.Builder
	b.WriteString("# Written by noisysim for this node; rewritten on every start.\n")
	put := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, quoteConf(v)) }
	defaults := DefaultSettings()
	for _, k := range slices.Sorted(maps.Keys(defaults)) {
		put(k, defaults[k])
	}
	if n.upstream != nil {
		// The heavy-report design lets long standby queries be cancelled
		// rather than hold back vacuum on the primary.
		put("hot_standby_feedback", "off")
	}
	for _, s := range c.settings {
		put(s.name, s.value)
	}
	put("listen_addresses", "127.0.0.1")
	put("port", fmt.Sprint(port))
	put("unix_socket_directories", n.sockDir)
	put("unix_socket_permissions", "0700")
	// Process titles read "postgres: noisysim-123/primary: …": which cluster
	// and node a process serves is visible in ps.
	put("cluster_name", filepath.Base(c.dir)+"/"+n.Name)
	if n.upstream != nil {
		put("primary_conninfo", fmt.Sprintf("host=127.0.0.1 port=%d user=%s passfile=%s application_name=%s sslmode=disable",
			n.upstream.Port, superuser, c.passfile(), n.Name))
		put("primary_slot_name", n.slot())
	}
	if err := writeFileAs(filepath.Join(n.dataDir, confFile), []byte(b.String()), 0o600, c.user); err != nil {
		return fmt.Errorf("write %s: %w", confFile, err)
	}
	main := filepath.Join(n.dataDir, "postgresql.conf")
	data, err := os.ReadFile(main)
	if err != nil {
		return fmt.Errorf("read postgresql.conf: %w", err)
	}
	include := "include '" + confFile + "'"
	if !strings.Contains(string(data), "\n"+include+"\n") {
		data = append(data, []byte("\n# noisysim's settings (last wins)\n"+include+"\n")...)
		if err := os.WriteFile(main, data, 0o600); err != nil {
			return fmt.Errorf("write postgresql.conf: %w", err)
		}
	}
	return nil
}

// writeAuth writes pg_hba.conf and pg_ident.conf: unix-socket connections
// only for the superuser, from the server's OS user or the invoking user
// (peer, and the socket directory is 0700); TCP only on 127.0.0.1 with
// scram-sha-256, replication included. No trust anywhere.
func (n *node) writeAuth() error {
	c := n.c
	hba := fmt.Sprintf(`# Written by noisysim.
# TYPE  DATABASE     USER  ADDRESS       METHOD
local   all          %[1]s               peer map=noisysim
local   replication  %[1]s               peer map=noisysim
host    all          all   127.0.0.1/32  scram-sha-256
host    replication  all   127.0.0.1/32  scram-sha-256
`, superuser)
	ident := fmt.Sprintf("# Written by noisysim.\nnoisysim  %s  %s\n", c.user.name, superuser)
	if c.invoker != c.user.name {
		ident += fmt.Sprintf("noisysim  %s  %s\n", c.invoker, superuser)
	}
	if err := writeFileAs(filepath.Join(n.dataDir, "pg_hba.conf"), []byte(hba), 0o600, c.user); err != nil {
		return fmt.Errorf("write pg_hba.conf: %w", err)
	}
	if err := writeFileAs(filepath.Join(n.dataDir, "pg_ident.conf"), []byte(ident), 0o600, c.user); err != nil {
		return fmt.Errorf("write pg_ident.conf: %w", err)
	}
	return nil
}

package pools

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// RoleConfig describes one least-privilege login role for a workload class.
// Zero values leave PostgreSQL's defaults in place.
type RoleConfig struct {
	// Name is the role name (any string; it is quoted).
	Name string
	// Password is the role's password, printable ASCII. Empty means
	// EnsureRoles generates a random one (a new one on every call).
	Password string
	// StatementTimeout becomes the role's statement_timeout (whole ms).
	// 0 means PostgreSQL's default (no timeout).
	StatementTimeout time.Duration
	// IdleInTransactionSessionTimeout becomes the role's
	// idle_in_transaction_session_timeout (whole ms). 0 means PostgreSQL's
	// default (none).
	IdleInTransactionSessionTimeout time.Duration
	// WorkMem becomes the role's work_mem, in PostgreSQL's memory syntax
	// ("64MB", "4096kB"). Empty means the server's work_mem.
	WorkMem string
	// ConnectionLimit is the role's CONNECTION LIMIT. 0 means no limit.
	ConnectionLimit int

	// Grants: what the workload may touch, nothing more. CONNECT on the
	// database is always granted.

	// Schemas get USAGE.
	Schemas []string
	// ReadTables get SELECT. Names are "table" or "schema.table".
	ReadTables []string
	// WriteTables get SELECT, INSERT, UPDATE and DELETE.
	WriteTables []string
	// Sequences get USAGE and SELECT (for serial or identity defaults).
	Sequences []string
}

// Default role names.
const (
	InteractiveRoleName = "noisysim_interactive"
	HeavyRoleName       = "noisysim_heavy"
	NaiveRoleName       = "noisysim_naive"
)

// Role settings of the reference design.
const (
	InteractiveStatementTimeout    = 3 * time.Second
	InteractiveIdleInTxTimeout     = 10 * time.Second
	InteractiveRoleConnectionLimit = 40
	HeavyStatementTimeout          = 120 * time.Second
	HeavyIdleInTxTimeout           = 30 * time.Second
	HeavyWorkMem                   = "64MB"
	HeavyRoleConnectionLimit       = 6
	NaiveRoleConnectionLimit       = 0 // no limit
)

// DefaultRoles returns the reference design's interactive and heavy roles.
// Add grants (Schemas, ReadTables, ...) for the workload's tables before
// passing them to EnsureRoles.
func DefaultRoles() (interactive, heavy RoleConfig) {
	interactive = RoleConfig{
		Name:                            InteractiveRoleName,
		StatementTimeout:                InteractiveStatementTimeout,
		IdleInTransactionSessionTimeout: InteractiveIdleInTxTimeout,
		ConnectionLimit:                 InteractiveRoleConnectionLimit,
	}
	heavy = RoleConfig{
		Name:                            HeavyRoleName,
		StatementTimeout:                HeavyStatementTimeout,
		IdleInTransactionSessionTimeout: HeavyIdleInTxTimeout,
		WorkMem:                         HeavyWorkMem,
		ConnectionLimit:                 HeavyRoleConnectionLimit,
	}
	return interactive, heavy
}

// NaiveRole returns the naive configuration's single role: no per-class
// timeouts, no connection limit.
func NaiveRole() RoleConfig { return RoleConfig{Name: NaiveRoleName} }

// Execer runs a statement: *pgx.Conn, *pgxpool.Pool and pgx.Tx satisfy it.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Querier runs a query: *pgx.Conn, *pgxpool.Pool and pgx.Tx satisfy it.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// memoryValue is PostgreSQL's memory-size syntax, checked before a value is
// put in a statement.
var memoryValue = regexp.MustCompile(`^[0-9]+\s*(B|kB|MB|GB|TB)?$`)

// EnsureRoles creates or updates each role so that it exists with exactly
// the given settings, and returns each role's password by name. admin must
// be connected to database as a superuser (or a role with CREATEROLE that
// may grant on the objects). It is idempotent: running it again converges
// the roles to the config (a setting now 0 is RESET, a password left empty
// is regenerated). Grants are only added: privileges granted earlier and no
// longer listed are not revoked.
//
// Each role is LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION
// NOBYPASSRLS with its CONNECTION LIMIT, role-level settings applied with
// ALTER ROLE ... SET, CONNECT on database and only the grants listed. The
// password is sent as a SCRAM-SHA-256 verifier, never in clear. Role
// settings take effect for new sessions only.
//
// EnsureRoles stops at the first failing statement and returns its error
// wrapped as "ensure role <name>: ...: %w"; errors wrap ErrInvalidConfig for
// a config it refuses before touching the server.
func EnsureRoles(ctx context.Context, admin Execer, database string, roles ...RoleConfig) (map[string]string, error) {
	passwords := make(map[string]string, len(roles))
	for _, r := range roles {
		if err := r.validate(); err != nil {
			return nil, err
		}
	}
	for _, r := range roles {
		pw := r.Password
		if pw == "" {
			pw = randomPassword()
		}
		for _, stmt := range r.statements(database, scramVerifier(pw)) {
			if _, err := admin.Exec(ctx, stmt.sql); err != nil {
				var pgErr *pgconn.PgError
				if stmt.create && errors.As(err, &pgErr) && pgErr.Code == "42710" {
					continue // created concurrently: the ALTER ROLE below converges it
				}
				return nil, fmt.Errorf("ensure role %s: %s: %w", r.Name, stmt.what, err)
			}
		}
		passwords[r.Name] = pw
	}
	return passwords, nil
}

func (r RoleConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("ensure role %q: %s: %w", r.Name, fmt.Sprintf(format, args...), ErrInvalidConfig)
	}
	switch {
	case r.Name == "":
		return bad("empty name")
	case r.StatementTimeout < 0 || r.IdleInTransactionSessionTimeout < 0:
		return bad("negative timeout")
	case r.ConnectionLimit < 0:
		return bad("negative connection limit %d", r.ConnectionLimit)
	case r.WorkMem != "" && !memoryValue.MatchString(r.WorkMem):
		return bad("work_mem %q is not a memory size like 64MB", r.WorkMem)
	case strings.ContainsFunc(r.Password, func(c rune) bool { return c < 0x20 || c > 0x7e }):
		// Non-ASCII would need SASLprep before hashing, which scramVerifier
		// does not do.
		return bad("password must be printable ASCII")
	}
	return nil
}

type roleStatement struct {
	what   string
	sql    string
	create bool // a duplicate_object error is fine
}

// statements returns the SQL that converges the role, in order.
func (r RoleConfig) statements(database, verifier string) []roleStatement {
	role := ident(r.Name)
	limit := r.ConnectionLimit
	if limit == 0 {
		limit = -1
	}
	// PostgreSQL lets only a superuser name SUPERUSER, REPLICATION or
	// BYPASSRLS in ALTER ROLE, even to switch them off: they are cleared
	// only on a role that has one, so that a CREATEROLE admin converges
	// the roles it made.
	attrs := fmt.Sprintf("LOGIN NOCREATEDB NOCREATEROLE NOINHERIT CONNECTION LIMIT %d PASSWORD %s", limit, literal(verifier))
	out := []roleStatement{
		{what: "create role", create: true, sql: fmt.Sprintf(
			`DO $noisysim$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = %s) THEN CREATE ROLE %s NOSUPERUSER NOREPLICATION NOBYPASSRLS %s; END IF; END $noisysim$`,
			literal(r.Name), role, attrs)},
		{what: "clear superuser attributes", sql: fmt.Sprintf(
			`DO $noisysim$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = %s AND (rolsuper OR rolreplication OR rolbypassrls)) THEN ALTER ROLE %s NOSUPERUSER NOREPLICATION NOBYPASSRLS; END IF; END $noisysim$`,
			literal(r.Name), role)},
		{what: "alter role", sql: fmt.Sprintf("ALTER ROLE %s %s", role, attrs)},
	}
	set := func(name, value string) {
		if value == "" {
			out = append(out, roleStatement{what: "reset " + name, sql: fmt.Sprintf("ALTER ROLE %s RESET %s", role, name)})
			return
		}
		out = append(out, roleStatement{what: "set " + name, sql: fmt.Sprintf("ALTER ROLE %s SET %s = %s", role, name, literal(value))})
	}
	set("statement_timeout", millis(r.StatementTimeout))
	set("idle_in_transaction_session_timeout", millis(r.IdleInTransactionSessionTimeout))
	set("work_mem", r.WorkMem)

	grant := func(what, sql string) { out = append(out, roleStatement{what: what, sql: sql}) }
	grant("grant connect", fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", ident(database), role))
	for _, s := range r.Schemas {
		grant("grant usage on schema "+s, fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s", ident(s), role))
	}
	for _, t := range r.ReadTables {
		grant("grant select on "+t, fmt.Sprintf("GRANT SELECT ON TABLE %s TO %s", qualified(t), role))
	}
	for _, t := range r.WriteTables {
		grant("grant write on "+t, fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE %s TO %s", qualified(t), role))
	}
	for _, s := range r.Sequences {
		grant("grant usage on sequence "+s, fmt.Sprintf("GRANT USAGE, SELECT ON SEQUENCE %s TO %s", qualified(s), role))
	}
	return out
}

// millis renders d as a PostgreSQL duration in whole milliseconds; 0 gives "".
func millis(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return fmt.Sprintf("%dms", max(d.Milliseconds(), 1))
}

// ident quotes one identifier.
func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// qualified quotes "schema.name" or "name" as an identifier.
func qualified(s string) string { return pgx.Identifier(strings.Split(s, ".")).Sanitize() }

// literal quotes s as an escape string literal, correct whatever
// standard_conforming_strings is. s must not contain NUL.
func literal(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `'`, `''`)
	return `E'` + s + `'`
}

func randomPassword() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// scramIterations is PostgreSQL's default scram_iterations.
const scramIterations = 4096

// scramVerifier returns the SCRAM-SHA-256 verifier PostgreSQL stores for
// password (RFC 5802, RFC 7677; format of PostgreSQL's scram_build_secret):
// SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>. PostgreSQL
// SASLprep-normalises passwords; generated passwords are ASCII, for which
// that is the identity.
func scramVerifier(password string) string {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	return scramVerifierSalt(password, salt, scramIterations)
}

func scramVerifierSalt(password string, salt []byte, iterations int) string {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		panic(fmt.Sprintf("scram: pbkdf2: %v", err)) // only for invalid parameters, which are constants
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	serverKey := mac(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(storedKey[:]), b64(serverKey))
}

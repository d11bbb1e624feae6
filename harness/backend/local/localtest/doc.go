// Package localtest starts throwaway PostgreSQL clusters for tests, with the
// local backend.
//
//	func TestSomething(t *testing.T) {
//		c := localtest.Start(t, backend.Spec{})
//		primary, _ := backend.First(c, backend.RolePrimary)
//		conn, err := pgx.Connect(t.Context(), primary.DSN())
//		…
//	}
//
// A test whose machine lacks PostgreSQL's server binaries (or, as root, the
// postgres system user) is skipped with one line saying so.
package localtest

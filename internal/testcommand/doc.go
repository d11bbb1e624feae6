// Package testcommand holds the test of the README's test command: it
// must show every skipped test with its reason, so that a skip never
// passes for a pass.
package testcommand

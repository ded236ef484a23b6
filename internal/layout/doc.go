// Package layout holds the test that keeps the repository's floors true:
// the table of docs/architecture.md says which floor each package stands
// on, and the test fails when a package imports across a floor it must
// not (a higher or its own floor, runc outside runtime/linux, the CLI
// library or the logger outside their places) or is missing from the
// table. It has no code of its own.
package layout

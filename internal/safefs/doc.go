// Package safefs is the one place for checked file I/O shared by the
// engine and the applications above it: files opened beneath a folder
// without following symlinks (openat2 RESOLVE_BENEATH), checked copies out
// of a tree someone else may change, and atomic (optionally durable)
// writes. It touches only the files it is asked to.
package safefs

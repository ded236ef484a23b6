// Package linux is skillrun's Linux back end: OCI containers through runc's
// libcontainer, as root or rootless. It is the only package that imports
// runc.
package linux

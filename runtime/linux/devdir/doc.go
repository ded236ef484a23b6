// Package devdir is the Linux host's prepared device folder: what a
// sandbox's /dev binds read-only instead of a tmpfs the runtime fills with
// one bind mount per device (in a user namespace devices cannot be
// created): one mount instead of seven, ~1 ms of every start. It makes
// device nodes (mknod, as root), so it belongs to the host preparation of
// the Linux back end, not to the pure spec generator.
package devdir

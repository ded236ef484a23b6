package spec

// WithDevDir makes a Linux spec's /dev a read-only bind of dir, a folder
// the host prepared (package runtime/linux/devdir; the Linux back end
// offers it as runtime.DevDirProvider), instead of a tmpfs the
// runtime fills with the default devices.
func WithDevDir(dir string) Option { return func(o *options) { o.devDir = dir } }

//go:build linux

package linux

// The container init (`BINARY init`, libcontainer's re-execution of this
// binary) is containerinit's: every binary that runs containers through
// this package becomes an init when asked to, before the rest of it is
// initialised.
import _ "github.com/skillrun/skillrun/runtime/linux/containerinit"

//go:build linux

// Package guardstub is the first stage of the lifetime guard (see
// runtime/linux's guard.go): a C constructor that runs before the Go
// runtime of a process started as the guard, and keeps it from starting
// at all while there is nothing to do. A guard mostly waits: for its
// runner to end (almost always after it removed its sandboxes itself) or
// for a deadline. The stub waits for those in poll(2), in a process that
// has paid only its exec; the Go runtime and the package initialisation
// (~3.5 ms of CPU in this binary) start only when there is work: a
// deadline came, the runner asked, or the runner ended with sandboxes
// still registered. The stub then returns, the process becomes the Go
// guard (guard.go), which reads the messages the stub left in the pipe.
//
// The stub runs only in a process whose environment has EnvStub, which
// it removes; everything else it needs is on fixed descriptors:
//
//	FdCommands  the command pipe's read end (the stub never reads it)
//	FdTimer     a timerfd on CLOCK_MONOTONIC the runner arms to its
//	            earliest deadline, or to now to hand over
//	FdCount     an eventfd (EFD_SEMAPHORE) counting the containers the
//	            runner has registered and not yet released
//
// When the pipe has no writer left: a count of zero means nothing is
// left to do, and the process exits there; otherwise the Go guard starts.
package guardstub

/*
#cgo CFLAGS: -Wall -O2
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void __attribute__((constructor)) skillrun_guard_stub(void)
{
	struct pollfd fds[2], count;
	struct stat st;

	if (getenv("_SKILLRUN_GUARD_STUB") == NULL)
		return;
	unsetenv("_SKILLRUN_GUARD_STUB");
	// Not the descriptors a runner passes: the Go guard decides.
	if (fstat(3, &st) != 0 || !S_ISFIFO(st.st_mode) || fcntl(5, F_GETFD) < 0 || fcntl(6, F_GETFD) < 0)
		return;
	fds[0].fd = 3;
	fds[0].events = 0; // only the end: POLLHUP is always reported
	fds[1].fd = 5;
	fds[1].events = POLLIN;
	for (;;) {
		fds[0].revents = fds[1].revents = 0;
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (fds[1].revents)
			return; // a deadline, or the runner hands over
		if (fds[0].revents)
			break; // the runner is gone
	}
	count.fd = 6;
	count.events = POLLIN;
	count.revents = 0;
	if (poll(&count, 1, 0) != 0 || count.revents != 0)
		return; // containers still registered (or cannot tell)
	_exit(0);
}
*/
import "C"

// EnvStub, in the guard's environment, runs the stub.
const EnvStub = "_SKILLRUN_GUARD_STUB"

// The guard's descriptors.
const (
	FdCommands = 3
	FdAlive    = 4
	FdTimer    = 5
	FdCount    = 6
)

//go:build linux && cgo

package sigfwd

/*
#cgo CFLAGS: -Wall -O2
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SIGFWD_NSIG 65

// The pipe's write end while installed, else -1; handlers in flight;
// the process whose signals are relayed.
static int sigfwd_fd = -1;
static int sigfwd_inflight;
static pid_t sigfwd_pid;
static struct sigaction sigfwd_old[SIGFWD_NSIG];

// Async-signal-safe: one write(2) to a non-blocking pipe (a full pipe
// drops the signal, as a full channel does under os/signal), errno kept.
//
// In a child this process forked, before it execs, the signal is the
// child's: the handler puts the default action back and sends the signal
// again, which the child gets as the handler returns (it is blocked while
// the handler runs), as it would have without the relay. The Go runtime
// resets its own handlers in a forked child, not the signals it leaves
// at their default (SIGCONT, SIGTSTP, SIGTTIN, SIGTTOU, 34), which the
// handler may take too. Raw system calls: a child of vfork shares this
// process' memory, C library caches included.
static void sigfwd_handler(int sig)
{
	int saved = errno;
	unsigned char b = (unsigned char)sig;

	if (syscall(SYS_getpid) != __atomic_load_n(&sigfwd_pid, __ATOMIC_SEQ_CST)) {
		struct sigaction dfl;
		memset(&dfl, 0, sizeof dfl);
		dfl.sa_handler = SIG_DFL;
		sigaction(sig, &dfl, NULL);
		syscall(SYS_kill, syscall(SYS_getpid), sig);
		errno = saved;
		return;
	}
	__atomic_add_fetch(&sigfwd_inflight, 1, __ATOMIC_SEQ_CST);
	int fd = __atomic_load_n(&sigfwd_fd, __ATOMIC_SEQ_CST);
	if (fd >= 0 && write(fd, &b, 1) < 0) {
		// Dropped: nothing else is safe to do here.
	}
	__atomic_sub_fetch(&sigfwd_inflight, 1, __ATOMIC_SEQ_CST);
	errno = saved;
}

// sigfwd_quiesce stops the handler's writes: it clears the descriptor
// and returns once no handler can write to it any more (one that read it
// before is counted in flight, one that reads it after finds -1), so the
// caller may close it.
static void sigfwd_quiesce(void)
{
	__atomic_store_n(&sigfwd_fd, -1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&sigfwd_inflight, __ATOMIC_SEQ_CST) != 0)
		sched_yield();
}

// sigfwd_install points each of sigs whose handler is a function (the
// Go runtime's), or that is at its default and in dflok (bit n-1: signal
// n), at sigfwd_handler, which writes to fd, and returns the signals it
// took as a mask in *taken. A signal found ignored, or at its default
// and not in dflok, is left as it was, and so is one blocked in the
// calling thread: the Go runtime keeps a signal blocked at the process'
// start blocked in every thread (this one included) but the one
// os/signal unblocks it in. On a failure every disposition is as it was,
// and errno is returned.
// SA_ONSTACK: the Go runtime requires it of every handler in its process
// (it runs on the thread's signal stack, never a goroutine's).
static int sigfwd_install(int fd, const int *sigs, int n, uint64_t dflok, uint64_t *taken)
{
	struct sigaction sa, old;
	sigset_t blocked;
	int i, err;

	*taken = 0;
	if ((err = pthread_sigmask(SIG_BLOCK, NULL, &blocked)) != 0)
		return err;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = sigfwd_handler;
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	// Every signal blocked while the handler runs, as the Go runtime
	// does for its own: handlers never nest on the thread's signal stack
	// (32 KiB, about 1.5 KiB a frame), which a burst of different
	// signals would otherwise overflow, and the kernel would then kill
	// the process with SIGSEGV.
	sigfillset(&sa.sa_mask);
	__atomic_store_n(&sigfwd_pid, (pid_t)syscall(SYS_getpid), __ATOMIC_SEQ_CST);
	__atomic_store_n(&sigfwd_fd, fd, __ATOMIC_SEQ_CST);
	for (i = 0; i < n; i++) {
		int s = sigs[i];
		if (s <= 0 || s >= SIGFWD_NSIG) {
			err = EINVAL;
			goto undo;
		}
		if (sigismember(&blocked, s))
			continue;
		// Read first: an ignored signal is never relayed, not even for
		// the moment a set-then-restore would take.
		if (sigaction(s, NULL, &old) != 0) {
			err = errno;
			goto undo;
		}
		// The handler's field whatever the flags: the Go runtime sets
		// SIG_IGN and SIG_DFL with SA_SIGINFO too.
		if (old.sa_handler == SIG_IGN)
			continue;
		if (old.sa_handler == SIG_DFL && !(dflok & ((uint64_t)1 << (s - 1))))
			continue;
		if (sigaction(s, &sa, NULL) != 0) {
			err = errno;
			goto undo;
		}
		sigfwd_old[s] = old;
		*taken |= (uint64_t)1 << (s - 1);
	}
	return 0;
undo:
	for (i = 1; i < SIGFWD_NSIG; i++)
		if (*taken & ((uint64_t)1 << (i - 1)))
			sigaction(i, &sigfwd_old[i], NULL);
	*taken = 0;
	sigfwd_quiesce();
	return err;
}

// sigfwd_fork_kill forks a child that sends itself sig and exits with
// status 0 if it is still there (TestForkedChildGetsDefault).
static pid_t sigfwd_fork_kill(int sig)
{
	pid_t pid = fork();
	if (pid == 0) {
		kill(getpid(), sig);
		_exit(0);
	}
	return pid;
}

// sigfwd_uninstall puts the previous handlers of the taken signals back
// and returns once no handler can write to the pipe any more.
static void sigfwd_uninstall(uint64_t taken)
{
	int i;

	for (i = 1; i < SIGFWD_NSIG; i++)
		if (taken & ((uint64_t)1 << (i - 1)))
			sigaction(i, &sigfwd_old[i], NULL);
	sigfwd_quiesce();
}
*/
import "C"

import (
	"os"
	"syscall"
	"unsafe"
)

// candidates are the signals the C handler takes over when their handler
// is the Go runtime's: the ones it catches from the start of a process
// (runtime/sigtab_linux_generic.go: not _SigDefault, not _SigSetStack)
// but SIGPIPE (Go's write path asks os/signal whether anyone wants it
// before it dies of an EPIPE on stdout or stderr) and those it needs for
// itself (SIGCHLD, SIGURG, SIGPROF, the synchronous ones); and the
// defaultOK ones. Built on use, not at package init: every process of
// the binary would pay for it, the container's init included.
func candidates() []C.int {
	s := []C.int{}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGABRT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGTERM, syscall.SIGXCPU,
		syscall.SIGXFSZ, syscall.SIGVTALRM, syscall.SIGWINCH, syscall.SIGIO, syscall.SIGPWR} {
		s = append(s, C.int(sig))
	}
	for _, sig := range defaultOK {
		s = append(s, C.int(sig))
	}
	// Not 32 and 33 (glibc's own).
	for n := 35; n <= 64; n++ {
		s = append(s, C.int(n))
	}
	return s
}

// defaultOK are the candidates the Go runtime leaves at their default
// action until os/signal asks for them (job control, and 34, musl's):
// the C handler takes them at their default too. A forked child does not
// reset them before it execs; the handler does (see sigfwd_handler).
var defaultOK = [...]syscall.Signal{syscall.SIGCONT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, 34}

// defaultMask is defaultOK as a mask (bit n-1: signal n).
func defaultMask() uint64 {
	var m uint64
	for _, s := range defaultOK {
		m |= 1 << (uint(s) - 1)
	}
	return m
}

// forwarded is every signal a runtime forwards. Not SIGKILL and SIGSTOP
// (no one can catch them), SIGCHLD and SIGURG (a foreground runtime
// drops them: its children's ends, the Go runtime's preemption), SIGPROF
// (the Go runtime's profiler keeps it), 32 and 33 (glibc's).
func forwarded() []os.Signal {
	var out []os.Signal
	for n := 1; n <= 64; n++ {
		switch syscall.Signal(n) {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGPROF, 32, 33:
			continue
		}
		out = append(out, syscall.Signal(n))
	}
	return out
}

// install opens the pipe and points the candidates at the handler; it
// returns the pipe's read end (non-blocking: os.NewFile reads it through
// the poller), its write end (the handler's) and the signals taken.
func install() (*os.File, int, uint64, error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return nil, -1, 0, err
	}
	var taken C.uint64_t
	list := candidates()
	if rc := C.sigfwd_install(C.int(fds[1]), (*C.int)(unsafe.Pointer(&list[0])), C.int(len(list)), C.uint64_t(defaultMask()), &taken); rc != 0 || taken == 0 {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		if rc == 0 {
			return nil, -1, 0, syscall.ENOENT
		}
		return nil, -1, 0, syscall.Errno(rc)
	}
	return os.NewFile(uintptr(fds[0]), "sigfwd"), fds[1], uint64(taken), nil
}

// uninstall puts the previous handlers back, then closes the write end w:
// the reader sees the end of the pipe.
func uninstall(w int, taken uint64) {
	C.sigfwd_uninstall(C.uint64_t(taken))
	syscall.Close(w)
}

// forkKill forks a child of this process that sends itself sig and exits
// with status 0 if it survives it; it returns the child's pid (tests).
func forkKill(sig syscall.Signal) (int, error) {
	pid, err := C.sigfwd_fork_kill(C.int(sig))
	if pid < 0 {
		return 0, err
	}
	return int(pid), nil
}

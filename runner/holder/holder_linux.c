//go:build linux && cgo

// The input holder (see holder.go and runner/warm.go), built into the
// binary: a warm sandbox's first process is "/proc/self/exe
// skillrun-input-holder MODE ARG...", and this constructor runs it
// before the Go runtime starts (as runc's nsexec does for `init`), then
// exits. Any other start of the binary returns at once.
//
// It does what runner/warm.go's holderScript does, without a shell to
// interpret: fd 3 is its copy of the stdin pipe's write end, fd 4 the
// ready pipe ("r", then "xN\n", the entry point's status), fd 5 the
// control pipe ("g" or the command line first, then "e").

#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { fdInputCopy = 3, fdReady = 4, fdControl = 5 };

// Exit statuses of the holder itself (as holderScript's): 125 the
// launcher's protocol failed (nothing ran, or what ran was killed), 126
// the command's working directory cannot be entered.
enum { exitProtocol = 125, exitCwd = 126 };

// A control line longer than this is a protocol failure: the launcher
// quotes a command line (CallCommand), and the kernel refuses an argv
// this long anyway.
#define maxControlLine (4 << 20)

// The control pipe, read in blocks: nothing else reads it.
static char *ctl_buf;
static size_t ctl_len, ctl_cap;

// control_line reads the next line from the control pipe (without its
// newline, NUL-terminated, valid until the next call); NULL at its end
// before a newline, or on an error.
static char *control_line(void)
{
	static size_t consumed;
	if (consumed > 0) {
		memmove(ctl_buf, ctl_buf + consumed, ctl_len - consumed);
		ctl_len -= consumed;
		consumed = 0;
	}
	for (;;) {
		char *nl = ctl_len > 0 ? memchr(ctl_buf, '\n', ctl_len) : NULL;
		if (nl != NULL) {
			*nl = '\0';
			consumed = nl - ctl_buf + 1;
			return ctl_buf;
		}
		if (ctl_len + 1 >= ctl_cap) {
			size_t cap = ctl_cap ? 2 * ctl_cap : 4096;
			if (cap > maxControlLine)
				return NULL;
			char *b = realloc(ctl_buf, cap);
			if (b == NULL)
				return NULL;
			ctl_buf = b;
			ctl_cap = cap;
		}
		ssize_t n = read(fdControl, ctl_buf + ctl_len, ctl_cap - ctl_len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL;
		ctl_len += n;
	}
}

// split parses a command line as runner.shellQuote writes it (each word
// in single quotes, a quote inside as '\'', words apart by a space), as
// the shell's eval "set -- LINE" would: quoted text as it is, a
// backslash escaping the next character, unquoted blanks between words.
// It returns a NULL-terminated argv (NULL when the line is malformed: a
// quote left open).
static char **split(const char *line)
{
	size_t n = strlen(line);
	char **argv = calloc(n / 2 + 2, sizeof(char *));
	char *out = malloc(n + 1);
	if (argv == NULL || out == NULL)
		return NULL;
	size_t argc = 0;
	char *word = NULL;
	for (const char *p = line; *p != '\0'; p++) {
		switch (*p) {
		case ' ':
		case '\t':
			if (word != NULL) {
				*out++ = '\0';
				argv[argc++] = word;
				word = NULL;
			}
			continue;
		}
		if (word == NULL)
			word = out;
		if (*p == '\'') {
			const char *end = strchr(p + 1, '\'');
			if (end == NULL)
				return NULL;
			memcpy(out, p + 1, end - p - 1);
			out += end - p - 1;
			p = end;
		} else if (*p == '\\' && p[1] != '\0') {
			*out++ = *++p;
		} else {
			*out++ = *p;
		}
	}
	if (word != NULL) {
		*out = '\0';
		argv[argc++] = word;
	}
	argv[argc] = NULL;
	return argv;
}

static void say(const char *s)
{
	size_t n = strlen(s);
	while (n > 0) {
		ssize_t w = write(fdReady, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; // the launcher is gone: it learns nothing more
		s += w;
		n -= w;
	}
}

// killAll SIGKILLs every process of the pid namespace but this one (the
// holder is its init).
static void killAll(void)
{
	kill(-1, SIGKILL);
}

static void run(char *mode, char **args)
{
	// Children are reaped here: an ignored SIGCHLD inherited from the
	// exec would have the kernel reap them, and the entry point's
	// status lost.
	signal(SIGCHLD, SIG_DFL);
	int cmd = strcmp(mode, "cmd") == 0;
	if (strcmp(mode, "call") == 0 || cmd) {
		// Nothing runs before the call: "g", or the command line.
		say("r");
		char *line = control_line();
		if (line == NULL)
			_exit(exitProtocol);
		if (cmd) {
			char **words = split(line);
			if (words == NULL || words[0] == NULL)
				_exit(exitProtocol);
			if (chdir(words[0]) != 0) {
				fprintf(stderr, "skillrun-input-holder: cd: can't cd to %s: %s\n", words[0], strerror(errno));
				_exit(exitCwd);
			}
			args = words + 1;
		}
	}
	if (args[0] == NULL)
		_exit(exitProtocol);
	// A launcher gone must not kill the holder with SIGPIPE (its writes
	// fail instead); the entry point gets the default back.
	signal(SIGPIPE, SIG_IGN);
	pid_t pid = fork();
	if (pid < 0)
		_exit(exitProtocol);
	if (pid == 0) {
		// The entry point: the pipe as stdin, none of the holder's
		// descriptors.
		close(fdInputCopy);
		close(fdReady);
		close(fdControl);
		signal(SIGPIPE, SIG_DFL);
		execvp(args[0], args);
		int e = errno;
		fprintf(stderr, "skillrun-input-holder: %s: %s\n", args[0], strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	// The holder keeps no reading end of the input: the launcher sees
	// EPIPE once the entry point is gone.
	close(STDIN_FILENO);
	if (!cmd && strcmp(mode, "call") != 0)
		say("r");
	// The input is complete only on "e": a launcher gone before it
	// (its end of the control pipe closed) gets the sandbox killed.
	char *line = control_line();
	if (line == NULL || strcmp(line, "e") != 0) {
		killAll();
		_exit(exitProtocol);
	}
	close(fdInputCopy);
	// Wait for the entry point, reaping whatever else ends meanwhile
	// (orphans are this init's children).
	int ws = 0;
	for (;;) {
		int st;
		pid_t w = waitpid(-1, &st, 0);
		if (w == pid) {
			ws = st;
			break;
		}
		if (w < 0 && errno != EINTR) {
			killAll();
			_exit(exitProtocol);
		}
	}
	int status = WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : WEXITSTATUS(ws);
	// What the entry point left running dies first, the holder's own
	// output closes (the launcher reads the output to its end), then the
	// status; the holder stays until the control pipe ends (the
	// launcher's Close), so that the container's teardown comes after
	// the answer.
	killAll();
	close(STDOUT_FILENO);
	close(STDERR_FILENO);
	char report[16];
	snprintf(report, sizeof report, "x%d\n", status);
	say(report);
	close(fdReady);
	control_line();
	_exit(status);
}

__attribute__((constructor)) static void skillrun_input_holder(int argc, char **argv, char **envp)
{
	(void)envp;
	if (argc >= 3 && argv != NULL && strcmp(argv[1], "skillrun-input-holder") == 0)
		run(argv[2], argv + 3);
}

// skillrun_input_holder_linked tells the Go side the constructor is in
// the binary. It gets its arguments from glibc, which passes them to
// constructors; other C libraries do not.
int skillrun_input_holder_linked(void)
{
#ifdef __GLIBC__
	return 1;
#else
	return 0;
#endif
}

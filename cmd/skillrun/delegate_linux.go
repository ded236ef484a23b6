//go:build linux && cgo && runtimeonly

package main

// The companion binaries' verbs before Go starts. skillrun, the OCI
// runtime, carries out skill, sandbox, mcp and openshell-driver by exec'ing
// a companion binary (companion.go). Done from Go, that exec comes after
// the runtime's start, package initialisation and threads: measured, 3.6-5
// ms more per `skillrun skill ...` than calling skillrun-skills directly.
// This C constructor, run by the C library before the Go runtime (as
// libcontainer's nsenter constructor is), finds the verb past the global
// flags and execs the companion beside this binary: 0.8 ms more. When it
// cannot (no companion beside the binary, a flag it does not know), it
// returns and the Go command does the same (PATH, its error messages).

/*
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The global flags of skillrun (app.go): those that take a value, and the
// boolean ones. TestCompanionVerbMatchesApp keeps these lists and the
// app's flags the same.
static const char *const skillrun_value_flags[] = {"log", "log-format", "root", "rootless", NULL};
static const char *const skillrun_bool_flags[] = {"debug", "systemd-cgroup", NULL};

static int skillrun_in(const char *const *list, const char *name, size_t len) {
	for (; *list; list++)
		if (strlen(*list) == len && strncmp(*list, name, len) == 0)
			return 1;
	return 0;
}

// skillrun_verb returns the index in argv of the verb, past the global
// flags (and their values), or -1 when there is none or a flag is not one
// of skillrun's (help, version, a mistake: Go's to answer).
int skillrun_verb(int argc, char **argv) {
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *n = argv[i] + 1;
		if (*n == '-')
			n++;
		if (*n == '\0' || *n == '-')
			return -1; // "-", "--", "---x"
		const char *eq = strchr(n, '=');
		size_t len = eq ? (size_t)(eq - n) : strlen(n);
		if (skillrun_in(skillrun_value_flags, n, len)) {
			if (!eq)
				i++;
		} else if (!skillrun_in(skillrun_bool_flags, n, len)) {
			return -1;
		}
	}
	return i < argc ? i : -1;
}

// skillrun_companion is the companion binary that carries out verb, or
// NULL.
const char *skillrun_companion(const char *verb) {
	if (strcmp(verb, "skill") == 0 || strcmp(verb, "sandbox") == 0 || strcmp(verb, "mcp") == 0)
		return "skillrun-skills";
	if (strcmp(verb, "openshell-driver") == 0)
		return "skillrun-openshell";
	return NULL;
}

__attribute__((constructor)) static void skillrun_delegate(int argc, char **argv, char **envp) {
	int v = skillrun_verb(argc, argv);
	if (v < 0)
		return;
	// `skillrun help skill`: the companion's help of its verb.
	const char *verb = argv[v];
	if (strcmp(verb, "help") == 0 && v + 1 < argc)
		verb = argv[v + 1];
	const char *name = skillrun_companion(verb);
	if (name == NULL)
		return;
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
	if (n <= 0)
		return;
	path[n] = '\0';
	char *slash = strrchr(path, '/');
	if (slash == NULL || (size_t)(slash + 1 - path) + strlen(name) >= sizeof path)
		return;
	strcpy(slash + 1, name);
	if (access(path, X_OK) != 0)
		return;
	// argv[0] stays what the caller ran: ps and pgrep still show
	// "skillrun skill run ...".
	execve(path, argv, envp);
	// Not exec'd: the Go command tries again and reports why.
}
*/
import "C"

import "unsafe"

// companionVerb is what the constructor decides for args (the command
// line, the program first): the companion binary it would exec, and the
// index of the verb (-1: none, Go's to answer).
func companionVerb(args []string) (string, int) {
	if len(args) == 0 {
		return "", -1
	}
	argv := make([]*C.char, len(args))
	for i, a := range args {
		argv[i] = C.CString(a)
	}
	defer func() {
		for _, p := range argv {
			C.free(unsafe.Pointer(p))
		}
	}()
	v := int(C.skillrun_verb(C.int(len(args)), (**C.char)(unsafe.Pointer(&argv[0]))))
	if v < 0 {
		return "", v
	}
	if c := C.skillrun_companion(argv[v]); c != nil {
		return C.GoString(c), v
	}
	return "", v
}

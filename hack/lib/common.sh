# shellcheck shell=bash
# Helpers shared by the hack/ scripts (hack/bench.sh, hack/conformance.sh, hack/demo.sh). Source it; it defines functions only.
#
#   busybox_rootfs DIR          populate DIR with a busybox-static root filesystem
#   write_true_config DIR ARGS  write DIR/config.json (runc-spec-like, no tty) running ARGS
#   runtime_version NAME PATH   one-line version of a runtime binary
#   machine_line                CPU model, cores and kernel on one line
#   ensure_cgroup_v1            mount the cgroup v1 controllers crun needs (hugetlb, net_cls,net_prio)
#   unmount_under DIR           lazily unmount everything mounted at or below DIR, deepest first
#   free_port                   a free TCP port on 127.0.0.1
#   wait_port PORT              wait (up to 5 s) until 127.0.0.1:PORT accepts connections

# busybox_rootfs DIR: a root filesystem built from Debian's busybox-static: /bin/busybox plus one
# symlink per applet, the usual empty mount points and a small /etc/passwd and /etc/group (uid/gid 10
# and the "test" user exist because runtime-tools' process_user test asks for them).
busybox_rootfs() {
	local dir=$1 applet
	[ -x /bin/busybox ] || { echo "busybox_rootfs: /bin/busybox missing (install busybox-static)" >&2; return 1; }
	mkdir -p "$dir"/{bin,dev,proc,sys,etc,tmp,root,var,run}
	chmod 1777 "$dir/tmp"
	cp /bin/busybox "$dir/bin/busybox"
	for applet in $(/bin/busybox --list); do
		[ "$applet" = busybox ] || ln -sf busybox "$dir/bin/$applet"
	done
	ln -sfn bin "$dir/sbin"
	mkdir -p "$dir/usr"
	ln -sfn ../bin "$dir/usr/bin"
	ln -sfn ../bin "$dir/usr/sbin"
	cat >"$dir/etc/passwd" <<-'EOF'
		root:x:0:0:root:/root:/bin/sh
		bin:x:1:1:bin:/bin:/bin/false
		daemon:x:2:2:daemon:/sbin:/bin/false
		test:x:10:10:test:/tmp:/bin/sh
		nobody:x:65534:65534:nobody:/nonexistent:/bin/false
	EOF
	cat >"$dir/etc/group" <<-'EOF'
		root:x:0:root
		bin:x:1:root,bin,daemon
		daemon:x:2:root,bin,daemon
		tty:x:5:
		wheel:x:10:root,test
		nogroup:x:65533:
		nobody:x:65534:
	EOF
	printf '127.0.0.1 localhost\n' >"$dir/etc/hosts"
	: >"$dir/etc/resolv.conf"
}

# write_true_config DIR ARG...: a config.json in the shape `runc spec` writes (no terminal, read-only
# root at DIR/rootfs, pid/net/ipc/uts/mount namespaces, default masked/readonly paths) running ARGs.
# ociVersion 1.0.2 because crun 1.8.1 rejects 1.3.x.
write_true_config() {
	local dir=$1 args
	shift
	args=$(printf '%s\n' "$@" | jq -R . | jq -cs .)
	jq -n --argjson args "$args" '{
	  ociVersion: "1.0.2",
	  process: {
	    terminal: false, user: {uid: 0, gid: 0}, args: $args,
	    env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
	    cwd: "/",
	    capabilities: {
	      bounding: ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"],
	      effective: ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"],
	      permitted: ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
	    },
	    rlimits: [{type: "RLIMIT_NOFILE", hard: 1024, soft: 1024}],
	    noNewPrivileges: true
	  },
	  root: {path: "rootfs", readonly: true},
	  hostname: "bench",
	  mounts: [
	    {destination: "/proc", type: "proc", source: "proc"},
	    {destination: "/dev", type: "tmpfs", source: "tmpfs", options: ["nosuid", "strictatime", "mode=755", "size=65536k"]},
	    {destination: "/dev/pts", type: "devpts", source: "devpts", options: ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
	    {destination: "/dev/shm", type: "tmpfs", source: "shm", options: ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
	    {destination: "/sys", type: "sysfs", source: "sysfs", options: ["nosuid", "noexec", "nodev", "ro"]}
	  ],
	  linux: {
	    resources: {devices: [{allow: false, access: "rwm"}]},
	    namespaces: [{type: "pid"}, {type: "network"}, {type: "ipc"}, {type: "uts"}, {type: "mount"}],
	    maskedPaths: ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	      "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"],
	    readonlyPaths: ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
	  }
	}' >"$dir/config.json"
}

# runtime_version NAME PATH: the version and commit lines of a runtime, joined on one line.
runtime_version() {
	local name=$1 path=$2 out
	out=$("$path" --version 2>/dev/null | head -n 2 | paste -sd ',' - | sed 's/,/, /') || true
	[ -n "$out" ] || out="$name (version unknown)"
	printf '%s\n' "$out"
}

# machine_line: "AMD EPYC, 2 cores, Linux 6.1.0 x86_64".
machine_line() {
	local cpu
	cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
	printf '%s, %s cores, Linux %s %s\n' "${cpu:-unknown CPU}" "$(nproc)" "$(uname -r)" "$(uname -m)"
}

# ensure_cgroup_v1: on a cgroup v1 / hybrid host, mount the hugetlb and net_cls,net_prio hierarchies
# under /sys/fs/cgroup when no hierarchy has them: crun 1.8 refuses to start any container without them
# (runc ignores missing controllers). The mounts stay; they change nothing for other cgroup users.
ensure_cgroup_v1() {
	local fs
	fs=$(stat -f -c %T /sys/fs/cgroup)
	if [ "$fs" = cgroup2fs ]; then
		echo "cgroups: unified cgroup v2 host: no v1 controllers to mount" >&2
		return 0
	fi
	mount_v1 hugetlb hugetlb
	mount_v1 net_cls,net_prio net_cls net_prio
}

# mount_v1 OPTS LINK...: mount a v1 hierarchy with controllers OPTS at /sys/fs/cgroup/OPTS unless one
# of its controllers is already attached somewhere (hierarchy id != 0 in /proc/cgroups).
mount_v1() {
	local opts=$1 c link
	shift
	for c in "$@"; do
		if awk -v c="$c" '$1 == c && $2 != 0 {found = 1} END {exit !found}' /proc/cgroups; then
			return 0
		fi
		grep -qw "^$c" /proc/cgroups || { echo "cgroups: kernel has no $c controller" >&2; return 0; }
	done
	echo "cgroups: mounting cgroup v1 controller(s) $opts at /sys/fs/cgroup/$opts (needed by crun)" >&2
	mkdir -p "/sys/fs/cgroup/$opts"
	mount -t cgroup -o "$opts" cgroup "/sys/fs/cgroup/$opts"
	if [ $# -gt 1 ]; then
		for link in "$@"; do
			[ -e "/sys/fs/cgroup/$link" ] || ln -s "$opts" "/sys/fs/cgroup/$link"
		done
	fi
}

# unmount_under DIR: lazily unmount everything mounted at or below DIR, deepest first.
unmount_under() {
	local dir=$1 m
	dir=$(realpath -m "$dir")
	# mountinfo field 5 is the mount point with spaces etc. octal-escaped; printf %b decodes them.
	awk '{print $5}' /proc/self/mountinfo | while read -r m; do printf '%b\n' "$m"; done |
		awk -v d="$dir" 'index($0, d "/") == 1 || $0 == d {print length($0) "\t" $0}' |
		sort -rn | cut -f2- | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
}

# free_port: a TCP port of 127.0.0.1 nothing listens on (the kernel's pick, released again).
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_port PORT: wait until something accepts connections on 127.0.0.1:PORT; non-zero after ~5 s.
wait_port() {
	local _
	for _ in $(seq 50); do
		python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), 1)" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

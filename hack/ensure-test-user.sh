#!/usr/bin/env bash
# Creates the unprivileged user the rootless tests run as (default
# skillrun-test), with subordinate ID ranges and a runtime directory, and
# prints its name. Needs root; prints nothing and exits 1 otherwise.
set -euo pipefail
user=${SKILLRUN_TEST_USER:-skillrun-test}
if [ "$(id -u)" -ne 0 ]; then
	echo "ensure-test-user: needs root to create $user" >&2
	exit 1
fi
if ! id "$user" >/dev/null 2>&1; then
	echo "ensure-test-user: creating the unprivileged user $user (home /home/$user, subordinate IDs) for the rootless runs" >&2
	useradd --create-home --shell /bin/bash "$user"
fi
uid=$(id -u "$user")
for f in /etc/subuid /etc/subgid; do
	touch "$f"
	grep -q "^$user:" "$f" || echo "$user:$((200000 + (uid % 1000) * 65536)):65536" >>"$f"
done
# XDG_RUNTIME_DIR as pam_systemd would make it.
install -d -m 0700 -o "$user" -g "$(id -g "$user")" "/run/user/$uid"
# The home must be traversable for nothing but its owner.
chmod 0750 "$(getent passwd "$user" | cut -d: -f6)"
echo "$user"

// Package skillenv builds and caches the dependency environments of
// skills: the Python and Node packages a skill declares (requirements.txt,
// package.json with its lock, or sandbox.yaml's dependencies), resolved
// once into a content-addressed folder and mounted read-only into every
// run of the skill.
//
// The key of an environment hashes what decides its content: the
// declaration (and a shipped or previously resolved lock), the
// interpreter's identity (its resolved path, size and modification time),
// the platform and the install policy (binary wheels only, npm scripts
// off). A build runs in the skill's own sandbox through the skill runner:
// no host secrets, writable only its staging folder (bound at
// /workspace), network only to the operator's package index through the
// egress allowlist. pip runs with --only-binary :all: and npm with
// --ignore-scripts unless the operator opts in. The staged tree is then
// checked (regular files, folders and symlinks only), made read-only and
// owned by the cache's owner, its digest recorded in a marker file
// written last, and it is renamed into place: a half-built environment is
// never visible under its key.
//
// Concurrency: one flock per key. A build holds it exclusively; a run
// holds it shared for as long as the skill runs, so Collect (gc) never
// removes an environment in use, and two first runs of one skill build
// once.
//
// Layout of the cache folder:
//
//	envs/KEY/            a ready environment (read-only)
//	envs/KEY/.skillrun-env.json   its marker (key, digest, packages)
//	build/KEY-RANDOM/    a build's staging folder
//	locks/KEY            the key's flock; its mtime is the last use
//	resolved/KEY.requirements.lock, resolved/KEY.package-lock.json
//	                     what the first build resolved, reused by rebuilds
//	logs/KEY.log         the last failed build's log
package skillenv

"""Sandbox probe: {"mode": ...} selects what to try; prints JSON."""
import json
import os
import socket
import sys
import time

req = json.load(sys.stdin)
mode = req.get("mode", "report")

if mode == "sleep":
    time.sleep(600)
elif mode == "spam":
    while True:
        sys.stdout.write("x" * 65536)
        sys.stdout.flush()
elif mode == "hog":
    hog = []
    while True:
        hog.append(bytearray(8 << 20))
elif mode == "threads":
    import threading
    n = 0
    try:
        for _ in range(500):
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
            n += 1
    except RuntimeError as exc:
        print(f"probe: started {n} threads: {exc}", file=sys.stderr)
        os._exit(1)
    print(json.dumps({"threads": n}))
elif mode == "write":
    path = req["path"]
    try:
        with open(path, "w") as f:
            f.write(req.get("content", "x"))
        print(json.dumps({"wrote": path}))
    except OSError as exc:
        print(json.dumps({"error": type(exc).__name__, "errno": exc.errno}))
elif mode == "kill":
    # Death by a signal of its own (a warm sandbox's entry point is the
    # input holder's child: SIGKILL reaches it; a cold run's is its pid
    # namespace's init, which ignores it from inside).
    import signal
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
elif mode == "size":
    # What arrived, all of it: a warm call's input larger than a pipe holds.
    pad = req.get("pad", "")
    print(json.dumps({"pad": len(pad), "intact": pad == "x" * len(pad)}))
elif mode == "report":
    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key + ":"):
                return line.split(":", 1)[1].strip()
    def tryit(fn):
        try:
            fn()
            return "ok"
        except OSError as exc:
            return f"errno {exc.errno}"
    def connect():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(("1.1.1.1", 53))
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    def unshare():
        if libc.unshare(0x10000000) != 0:
            raise OSError(ctypes.get_errno(), "unshare")
    def raw():
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    listing = {}
    for p in ("/", "/etc", "/home", "/root", "/run", "/var", "/sys"):
        try:
            listing[p] = sorted(os.listdir(p))
        except OSError as exc:
            listing[p] = f"errno {exc.errno}"
    print(json.dumps({
        "uid": os.getuid(), "gid": os.getgid(),
        "uid_map": open("/proc/self/uid_map").read().split(),
        "cap_eff": status("CapEff"), "cap_bnd": status("CapBnd"),
        "no_new_privs": status("NoNewPrivs"), "seccomp": status("Seccomp"),
        "env": dict(os.environ),
        "hostname": socket.gethostname(),
        "ls": listing,
        "passwd": open("/etc/passwd").read(),
        "connect": tryit(connect),
        "unshare": tryit(unshare),
        "af_packet": tryit(raw),
        "write_skill": tryit(lambda: open("/skill/x", "w")),
        "write_usr": tryit(lambda: open("/usr/x", "w")),
        "write_tmp": tryit(lambda: open("/tmp/x", "w").write("x")),
        "cwd": os.getcwd(),
    }))

"""Fetch an https URL and report status, type and the start of the body."""
import json
import sys
import urllib.error
import urllib.request


def main():
    req = json.load(sys.stdin)
    limit = req.get("max_bytes", 2000)
    try:
        with urllib.request.urlopen(req["url"], timeout=10) as resp:
            body = resp.read(limit)
            out = {"url": req["url"], "status": resp.status,
                   "content_type": resp.headers.get("Content-Type", ""),
                   "body": body.decode("utf-8", "replace")}
    except (urllib.error.URLError, OSError) as exc:
        json.dump({"url": req["url"], "error": str(exc)}, sys.stdout)
        print(f"fetch-url: {exc}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

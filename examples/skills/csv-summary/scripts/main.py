"""Summarise CSV data given on the command line."""
import argparse
import collections
import csv
import io
import json
import statistics
import sys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", required=True, help="CSV text with a header row")
    p.add_argument("--delimiter", default=",", help="field delimiter (default ',')")
    p.add_argument("--group_by", help="column to group numeric means by")
    p.add_argument("--top", type=int, default=3, help="how many common values to list per text column")
    return p.parse_args()


def number(v):
    try:
        return float(v)
    except ValueError:
        return None


def describe(values, top):
    nums = [n for n in (number(v) for v in values if v != "") if n is not None]
    non_empty = [v for v in values if v != ""]
    if non_empty and len(nums) == len(non_empty):
        return {
            "type": "number", "count": len(nums), "missing": len(values) - len(nums),
            "min": min(nums), "max": max(nums),
            "mean": round(statistics.fmean(nums), 6), "median": statistics.median(nums),
        }
    common = collections.Counter(non_empty).most_common(top)
    return {"type": "text", "count": len(non_empty), "missing": len(values) - len(non_empty),
            "distinct": len(set(non_empty)), "most_common": common}


def main():
    args = parse_args()
    if len(args.delimiter) != 1:
        print("csv-summary: --delimiter must be one character", file=sys.stderr)
        return 2
    rows = list(csv.reader(io.StringIO(args.data), delimiter=args.delimiter))
    if not rows:
        print("csv-summary: no header row", file=sys.stderr)
        return 2
    header, body = rows[0], rows[1:]
    cols = {h: [r[i] if i < len(r) else "" for r in body] for i, h in enumerate(header)}
    out = {"rows": len(body), "columns": {h: describe(v, args.top) for h, v in cols.items()}}
    if args.group_by:
        if args.group_by not in cols:
            print(f"csv-summary: no column {args.group_by!r}", file=sys.stderr)
            return 2
        groups = collections.defaultdict(list)
        for r in body:
            groups[r[header.index(args.group_by)]].append(r)
        out["groups"] = {}
        for key, rs in sorted(groups.items()):
            g = {"rows": len(rs)}
            for i, h in enumerate(header):
                nums = [number(r[i]) for r in rs if i < len(r)]
                if h != args.group_by and nums and all(n is not None for n in nums):
                    g["mean_" + h] = round(statistics.fmean(nums), 6)
            out["groups"][key] = g
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

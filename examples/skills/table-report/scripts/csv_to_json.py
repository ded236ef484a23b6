"""csv_to_json.py INPUT.csv OUTPUT.json: the rows of a CSV file as a JSON list of objects.

Values that look like numbers become numbers. Reads sys.argv directly, as many published
skill scripts do.
"""
import csv
import json
import sys


def value(s):
    try:
        return int(s)
    except ValueError:
        try:
            return float(s)
        except ValueError:
            return s


def main(argv):
    if len(argv) != 3:
        print("usage: csv_to_json.py INPUT.csv OUTPUT.json", file=sys.stderr)
        return 2
    with open(argv[1], newline="", encoding="utf-8") as f:
        rows = [{k: value(v) for k, v in row.items()} for row in csv.DictReader(f)]
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=1)
    print(f"{len(rows)} rows written to {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

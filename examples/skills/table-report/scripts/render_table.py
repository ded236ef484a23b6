"""render_table.py ROWS.json OUTPUT.md --column NAME [--title T] [--top N] [--ascending]

A Markdown report: a title, the summary of one numeric column (report.stats) and the rows
sorted by it, as a table rendered by the tabulate package.
"""
import argparse
import json
import pathlib
import sys

# The skill's own library, wherever the script is run from.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from report.stats import summarize  # noqa: E402
from tabulate import tabulate  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("rows", help="JSON file with a list of objects")
    p.add_argument("output", help="Markdown file to write")
    p.add_argument("--column", required=True, help="numeric column to summarise and sort by")
    p.add_argument("--title", default="Report")
    p.add_argument("--top", type=int, default=0, help="keep only the first N rows")
    p.add_argument("--ascending", action="store_true")
    a = p.parse_args()
    rows = json.loads(pathlib.Path(a.rows).read_text(encoding="utf-8"))
    s = summarize(rows, a.column)
    rows = sorted(rows, key=lambda r: r.get(a.column, 0), reverse=not a.ascending)
    if a.top:
        rows = rows[: a.top]
    headers = list(rows[0].keys()) if rows else []
    table = tabulate([[r.get(h, "") for h in headers] for r in rows], headers=headers, tablefmt="github")
    out = [f"# {a.title}", "",
           f"{s['count']} rows; {a.column}: total {s['total']}, mean {s['mean']:.2f}, min {s['min']}, max {s['max']}",
           "", table, ""]
    pathlib.Path(a.output).write_text("\n".join(out), encoding="utf-8")
    print(f"report written to {a.output}")


if __name__ == "__main__":
    main()

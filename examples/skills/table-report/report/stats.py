"""Statistics over a list of rows (dicts)."""


def summarize(rows, column):
    """Count, total, mean, min and max of the numeric values of column."""
    values = [r[column] for r in rows if isinstance(r.get(column), (int, float))]
    if not values:
        return {"column": column, "count": 0, "total": 0, "mean": 0.0, "min": None, "max": None}
    return {
        "column": column,
        "count": len(values),
        "total": sum(values),
        "mean": sum(values) / len(values),
        "min": min(values),
        "max": max(values),
    }

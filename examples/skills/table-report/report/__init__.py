"""The table-report skill's library: import report.stats from your own code."""

"""mst.runs."""

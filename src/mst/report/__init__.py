"""mst.report."""

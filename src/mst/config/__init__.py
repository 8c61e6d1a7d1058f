"""mst.config."""

"""Executing prepared notebooks, watched: in this process, in fork servers, or on a Dask cluster."""

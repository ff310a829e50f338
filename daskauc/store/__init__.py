"""Stores on the ground floor: the Zarr store protocol every daskauc store follows (paths and
URLs, the chunk manifest and its checks, opening: :mod:`.protocol`), writing and committing
a store safely (:mod:`.write`), a dataset store's checked dask arrays (:mod:`.dataset`),
checked raw chunk reads (:mod:`.rawchunks`), and object storage's URLs, credentials and first
request (:mod:`.urls`)."""

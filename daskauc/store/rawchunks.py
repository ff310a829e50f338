"""Reading and writing daskauc's own uncompressed chunks straight from and to their files.

Zarr's read path for one uncompressed 64 MiB chunk (its async store, a buffer per codec, a
fresh output array) ran at 0.6-1.3 GB/s per process on covtype's embedding, where reading
the same cached file into an array with ``readinto`` and checking its CRC32C runs at
3.5-4.3 GB/s (measured in ``benchmarks/chains.py``). Streamed solvers read every chunk
at every epoch, so this was most of a streamed epoch. Writing is the mirror image: the
embedding write is one file per chunk, and Zarr's encode path adds copies to it.

:class:`RawChunks` handles a chunk-aligned row range of a Zarr v3 array when the array is on
a local filesystem and its chunks are stored as plain bytes: codecs ``bytes`` (little endian
on a little-endian machine) optionally followed by ``crc32c``, a regular grid chunked along
rows only. That is every array daskauc writes without a compressor (embeddings, by
default). The file of chunk ``i`` then holds exactly ``chunk_rows`` rows in C order (Zarr
pads the last chunk to the full chunk shape with the fill value) followed by the 4-byte
little-endian CRC32C of those bytes; :meth:`RawChunks.write` writes the same bytes Zarr
would (tested byte for byte).

The checks are Zarr's and daskauc's: a chunk file that is absent, of any other size, whose
checksum differs, or whose checksum is not the one the commit recorded for its position
(chunk files swapped or copied over) is a :class:`~daskauc.store.protocol.StoreIntegrityError`
naming it, never data.
Anything else (compressed chunks, object storage, a selection that is not whole rows) goes
through Zarr.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import numpy as np

_LOCAL = threading.local()


@contextlib.contextmanager
def reusing_buffers():
    """Raw reads in this block (this thread) go into reused buffers (:class:`BufferPool`):
    for streamed chunks, dropped by the task that read them. A fresh 64 MiB array costs its
    page faults on every read (3.0 against 6.1 GB/s measured for covtype's chunks)."""
    before = getattr(_LOCAL, "reuse", False)
    _LOCAL.reuse = True
    try:
        yield
    finally:
        _LOCAL.reuse = before


class BufferPool:
    """Byte buffers handed out again once nothing refers to them any more.

    A buffer is free when its only references are the pool's own (every numpy view of it
    holds a reference to it, so a chunk still in use, kept in a state, or read ahead is never
    overwritten). At most ``max_buffers`` are kept (default: two per thread of the process,
    plus one); beyond that the oldest is forgotten (it lives on as long as its arrays do)."""

    def __init__(self, max_buffers: int | None = None):
        self.max_buffers = max_buffers
        self._lock = threading.Lock()
        self._buffers: list[np.ndarray] = []

    def take(self, nbytes: int) -> np.ndarray:
        with self._lock:
            if self.max_buffers is None:  # one in use and one read ahead per thread, + 1
                from .._compute import threads_here

                self.max_buffers = 2 * threads_here() + 1
            for buf in self._buffers:
                # references: the list, ``buf`` here and getrefcount's argument
                if buf.nbytes == nbytes and sys.getrefcount(buf) == 3:
                    return buf
            buf = np.empty(nbytes, dtype=np.uint8)
            self._buffers.append(buf)
            if len(self._buffers) > self.max_buffers:
                self._buffers.pop(0)
            return buf


_POOL = BufferPool()


class RawChunks:
    """The plain-bytes layout of a Zarr array, or None from :meth:`of` when it has another."""

    def __init__(self, root: str, array_path: str, shape: tuple, chunk_rows: int, dtype,
                 checksum: bool, encode_key, fill_value=0, recorded: dict | None = None):
        self.root, self.array_path, self.fill_value = root, array_path, fill_value
        #: chunk key -> the CRC32C the commit recorded at that position (may be empty)
        self.recorded = dict(recorded or {})
        self.shape, self.chunk_rows = tuple(shape), int(chunk_rows)
        self.dtype, self.checksum = np.dtype(dtype), bool(checksum)
        self.encode_key = encode_key
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        self.chunk_bytes = self.chunk_rows * self.row_bytes

    @classmethod
    def of(cls, array, recorded: dict | None = None) -> RawChunks | None:
        """The raw layout of a ``zarr.Array`` if its chunks can be read as plain files;
        ``recorded``: chunk key -> the CRC32C its file must hold (the commit's record)."""
        from zarr.codecs import BytesCodec, Crc32cCodec
        from zarr.core.chunk_grids import RegularChunkGrid
        from zarr.storage import LocalStore

        meta = array.metadata
        store = array.store_path.store
        if getattr(meta, "zarr_format", None) != 3 or not isinstance(store, LocalStore):
            return None
        if not isinstance(meta.chunk_grid, RegularChunkGrid) or array.ndim < 1:
            return None
        if tuple(array.chunks[1:]) != tuple(array.shape[1:]):
            return None  # chunked along other axes than rows
        codecs = list(meta.codecs)
        if not codecs or not isinstance(codecs[0], BytesCodec):
            return None
        endian = codecs[0].endian
        if endian is not None and (getattr(endian, "value", endian) != sys.byteorder):
            return None
        if len(codecs) > 2 or (len(codecs) == 2 and not isinstance(codecs[1], Crc32cCodec)):
            return None
        dtype = np.dtype(array.dtype)
        if dtype.hasobject or not dtype.isnative:
            return None
        return cls(os.fspath(store.root), array.store_path.path, array.shape, array.chunks[0],
                   dtype, len(codecs) == 2, meta.encode_chunk_key, meta.fill_value, recorded)

    def key(self, i: int) -> str:
        coords = (i,) + (0,) * (len(self.shape) - 1)
        return "/".join(p for p in (self.array_path, self.encode_key(coords)) if p)

    def read(self, start: int, stop: int, fail) -> np.ndarray:
        """Rows ``start:stop`` (whole chunks, except at the array's end) as a new array.

        ``fail(kind, i, key, detail)`` returns the exception to raise for chunk ``i`` if it is
        ``"missing"``, of the wrong ``"size"``, fails its ``"checksum"`` or holds another
        position's (``"moved"``, ``detail`` the checksum it holds in hex).
        """
        shape = (stop - start, *self.shape[1:])
        if getattr(_LOCAL, "reuse", False):
            flat = _POOL.take((stop - start) * self.row_bytes)
            out = flat.view(self.dtype).reshape(shape)
        else:
            out = np.empty(shape, dtype=self.dtype)
            flat = out.reshape(-1).view(np.uint8)
        cr = self.chunk_rows
        for i in range(start // cr, -(-stop // cr)):
            lo, hi = max(start, i * cr), min(stop, (i + 1) * cr)
            whole = lo == i * cr and hi == (i + 1) * cr
            dest = flat[(lo - start) * self.row_bytes : (hi - start) * self.row_bytes]
            buf = dest if whole else np.empty(self.chunk_bytes, dtype=np.uint8)
            self._read_chunk(i, buf, fail)
            if not whole:
                dest[:] = buf[(lo - i * cr) * self.row_bytes : (hi - i * cr) * self.row_bytes]
        return out

    def _read_chunk(self, i: int, buf: np.ndarray, fail) -> None:
        """Chunk ``i``'s bytes into ``buf`` (chunk_bytes long); size and checksum checked."""
        key = self.key(i)
        path = os.path.join(self.root, key)
        expected = self.chunk_bytes + (4 if self.checksum else 0)
        try:
            f = open(path, "rb", buffering=0)
        except FileNotFoundError:
            raise fail("missing", i, key, "") from None
        with f:
            st = os.fstat(f.fileno())
            if st.st_size != expected:
                raise fail("size", i, key, f"{st.st_size} bytes instead of {expected}")
            signature = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            check = self.checksum and _VERIFIED.get(path) != signature
            # read in pieces, each checksummed while it is still in the cache (one pass over
            # memory instead of two: 13 ms instead of 15 for a 64 MiB chunk, 11 ms unchecked)
            view, got, crc = memoryview(buf), 0, 0
            while got < self.chunk_bytes:
                n = f.readinto(view[got : got + READ_PIECE])
                if not n:
                    raise fail("size", i, key, f"it ended after {got} bytes")
                if check:
                    crc = _crc32c_extend(crc, buf[got : got + n])
                got += n
            # read even when the data's check is cached: it binds the file to its position
            stored = f.read(4) if self.checksum else b""
        if check:
            computed = np.uint32(crc).astype("<u4").tobytes()
            if computed != stored:
                _VERIFIED.pop(path, None)
                raise fail("checksum", i, key, f"stored {stored!r}, computed {computed!r}")
        want = self.recorded.get(key)
        if want is not None and int.from_bytes(stored, "little") != want:
            raise fail("moved", i, key, f"{int.from_bytes(stored, 'little'):08x}")
        if check:
            if len(_VERIFIED) >= VERIFIED_FILES:
                _VERIFIED.clear()
            _VERIFIED[path] = signature

    def write(self, start: int, block: np.ndarray) -> bool:
        """Write ``block`` at rows ``start:`` if it is whole chunks (the last may end with the
        array); False (nothing written) when it is not, so the caller writes through Zarr."""
        cr, n = self.chunk_rows, self.shape[0]
        stop = start + block.shape[0]
        if (start % cr or (stop % cr and stop != n) or stop > n
                or block.shape[1:] != self.shape[1:]):
            return False
        block = np.ascontiguousarray(block, dtype=self.dtype)
        for i in range(start // cr, -(-stop // cr)):
            part = block[i * cr - start : min(stop, (i + 1) * cr) - start]
            if part.shape[0] < cr:  # the array's last chunk, padded as Zarr pads it
                full = np.full((cr, *self.shape[1:]), self.fill_value, dtype=self.dtype)
                full[: part.shape[0]] = part
                part = full
            data = part.reshape(-1).view(np.uint8)
            path = os.path.join(self.root, self.key(i))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb", buffering=0) as f:
                view, done = memoryview(data), 0
                while done < data.size:
                    done += f.write(view[done:])
                if self.checksum:
                    f.write(_crc32c(data))
        return True


#: bytes read (and checksummed) at a time: a piece stays in the cache for its checksum
READ_PIECE = 4 * 2**20

#: chunk files whose checksum this process has verified, with the signature of the file it
#: verified (device, inode, size, modification and status-change times in ns). A file read
#: again unchanged is not checksummed again: solvers that stream read every chunk at every
#: pass, and the checksum was a fifth of a streamed Newton pass over covtype's embedding.
#: Any write to the file, a replacement (new inode) or a restored modification time (the
#: status-change time cannot be set back) changes the signature, so the file is checked
#: again; the checksum guards against what happens to the file, not to this process' memory.
_VERIFIED: dict[str, tuple] = {}
VERIFIED_FILES = 1_000_000


def _crc32c_extend(crc: int, data: np.ndarray) -> int:
    import google_crc32c

    ro = data.view()
    ro.flags.writeable = False  # google_crc32c reads only read-only buffers
    return google_crc32c.extend(crc, ro)


def _crc32c(data: np.ndarray) -> bytes:
    """The CRC32C of an array's bytes as Zarr stores it (4 bytes, little endian)."""
    import google_crc32c

    ro = data.view()
    ro.flags.writeable = False  # google_crc32c reads only read-only buffers
    return np.uint32(google_crc32c.value(ro)).astype("<u4").tobytes()


def write_rows(array, start: int, block: np.ndarray) -> None:
    """``array[start : start + len(block)] = block`` for a ``zarr.Array``: straight to the chunk
    files when they are plain bytes and the rows are whole chunks, else through Zarr."""
    raw = RawChunks.of(array)
    if raw is None or not raw.write(start, block):
        array[start : start + block.shape[0]] = block

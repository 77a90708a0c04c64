"""Preallocated telemetry channels, written in place every control step and saved atomically.

Every channel is one numpy array with the step index as its first axis. Names carry the frame and,
for wrenches, the sign convention (``ext`` = environment on tool):

=========================  ========  ==========  ===================================================
channel                    shape     unit        meaning
=========================  ========  ==========  ===================================================
t                          (N,)      s           control-step time
q, v                       (N, nv)   rad, rad/s  arm joint positions / velocities
tau_cmd                    (N, nv)   N·m         controller torque before clipping
tau_applied                (N, nv)   N·m         torque sent to MuJoCo (clipped to limits)
saturated                  (N,)      bool        any joint clipped this step
ee_pos                     (N, 3)    m           EE (tool tip) origin, world
ee_quat                    (N, 4)    —           EE orientation, world, (w, x, y, z)
ee_vel                     (N, 6)    m/s, rad/s  EE twist [v; ω], world axes at the EE origin
ee_pos_des, ee_vel_des     (N, 3)    m, m/s      planner reference, world
ee_acc_des                 (N, 3)    m/s²        planner reference acceleration, world
ee_quat_des                (N, 4)    —           desired orientation, world, (w, x, y, z)
ee_omega_des               (N, 3)    rad/s       desired angular velocity, world
wrench_ext_world           (N, 6)    N, N·m      F/T: env-on-tool [f; n], world axes, about sensor S
wrench_ext_body            (N, 6)    N, N·m      F/T: env-on-tool, EE axes, about the EE origin
wrench_truth_world         (N, 6)    N, N·m      contact truth, same frame as wrench_ext_world
wrench_truth_body          (N, 6)    N, N·m      contact truth, same frame as wrench_ext_body
wrench_used_world          (N, 6)    N, N·m      the wrench the controller used (sensor/truth/observer)
contact_count              (N,)      —           contacts involving the tool
contact_count_all          (N,)      —           all active contacts in the scene
contact_force_peak         (N,)      N           max ‖f‖ of the contact truth over the MuJoCo substeps of
                                                 the control period ending at t (sim.wrench.SubstepContact)
contact_axial_force_peak   (N,)      N           max |fᵀa| over those substeps (a: the mating axis)
contact_count_peak         (N,)      —           max number of tool contacts over those substeps
manipulability             (N,)      —           sqrt(det(J Jᵀ)) of the EE Jacobian
ctrl_<name>                (N,)      varies      controller diagnostics (see the controller's docs)
=========================  ========  ==========  ===================================================
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import tempfile
import weakref
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

#: name → (per-step shape using "nv" for the arm dof count, dtype, unit, doc)
CHANNELS: dict[str, tuple[tuple, str, str, str]] = {
    "t": ((), "f8", "s", "control-step time"),
    "q": (("nv",), "f8", "rad", "arm joint positions"),
    "v": (("nv",), "f8", "rad/s", "arm joint velocities"),
    "tau_cmd": (("nv",), "f8", "N·m", "controller torque before clipping"),
    "tau_applied": (("nv",), "f8", "N·m", "torque applied (clipped)"),
    "saturated": ((), "?", "", "any joint torque clipped"),
    "ee_pos": ((3,), "f8", "m", "EE origin, world"),
    "ee_quat": ((4,), "f8", "", "EE orientation (w,x,y,z), world"),
    "ee_vel": ((6,), "f8", "m/s|rad/s", "EE twist [v; w], world axes"),
    "ee_pos_des": ((3,), "f8", "m", "desired EE position, world"),
    "ee_vel_des": ((3,), "f8", "m/s", "desired EE velocity, world"),
    "ee_acc_des": ((3,), "f8", "m/s^2", "desired EE acceleration, world"),
    "ee_quat_des": ((4,), "f8", "", "desired EE orientation (w,x,y,z), world"),
    "ee_omega_des": ((3,), "f8", "rad/s", "desired EE angular velocity, world"),
    "wrench_ext_world": ((6,), "f8", "N|N·m", "F/T env-on-tool [f;n], world axes, about the sensor"),
    "wrench_ext_body": ((6,), "f8", "N|N·m", "F/T env-on-tool [f;n], EE axes, about the EE origin"),
    "wrench_truth_world": ((6,), "f8", "N|N·m", "contact truth, world axes, about the sensor"),
    "wrench_truth_body": ((6,), "f8", "N|N·m", "contact truth, EE axes, about the EE origin"),
    "wrench_used_world": ((6,), "f8", "N|N·m", "wrench fed to the controller, world axes"),
    "contact_count": ((), "i4", "", "contacts involving the tool"),
    "contact_count_all": ((), "i4", "", "all contacts in the scene"),
    "contact_force_peak": ((), "f8", "N", "max |f| of the contact truth over the substeps of the period ending at t"),
    "contact_axial_force_peak": ((), "f8", "N", "max |f.a| (a: mating axis) over the substeps of the period"),
    "contact_count_peak": ((), "i4", "", "max tool contacts over the substeps of the period"),
    "manipulability": ((), "f8", "", "sqrt(det(J J^T))"),
}


#: rows of the in-memory block of a long run: a run of more steps spills each full block to a part
#: file on disk (see :class:`Telemetry`), so the memory it takes does not grow with its duration
CHUNK_ROWS = 16384
#: members of a stored .npz at least this large are memory-mapped by :func:`load_npz` (``mmap=True``)
MMAP_MIN_BYTES = 1 << 20
#: prefix of the wall-clock columns inside a part file (they are not telemetry channels)
_TIMING_PREFIX = "__timing__"
PART_GLOB = "telemetry.part*.npz"


_COMPONENT_LABELS = {
    3: ("x", "y", "z"),
    4: ("w", "x", "y", "z"),
    6: ("fx", "fy", "fz", "nx", "ny", "nz"),
}


def channel_labels(name: str, width: int, joint_names: Sequence[str] = ()) -> list[str]:
    """Series names for a channel's columns (joint names, x/y/z, fx…nz, w/x/y/z, or the name): the labels of
    ``Run.to_frame()`` and of the Rerun export."""
    if width == 1:
        return [name]
    if name in ("q", "v", "tau_cmd", "tau_applied") and len(joint_names) == width:
        return list(joint_names)
    if name.startswith("wrench_") and width == 6:
        return list(_COMPONENT_LABELS[6])
    if name == "ee_vel" and width == 6:
        return ["vx", "vy", "vz", "wx", "wy", "wz"]
    return list(_COMPONENT_LABELS.get(width, [f"{k}" for k in range(width)]))


class TelemetryWriteError(OSError):
    """Spilling telemetry to disk failed (disk full, folder removed): the run stops, the parts
    written so far are kept."""


class Telemetry:
    """Per-step channels (see :data:`CHANNELS`), recorded in place, in memory or spilled to disk.

    The per-step channels of :data:`CHANNELS` and the scalar ``extra`` channels live side by side in
    ONE float64 block of shape (rows, W); each channel is a column view of it (in the order
    :attr:`row_channels`), so the loop records a whole step with a single
    ``np.concatenate(sources, out=block[i - base])``. Boolean and integer channels are stored as
    floats and converted back by :meth:`channels`. ``extra_shaped`` channels (e.g. the hand's) are
    separate arrays written by their owner at the same row.

    A run of at most ``chunk_rows`` steps is held whole in memory (rows = n_steps, base = 0, no file
    is written until :meth:`save`). A longer run holds ``chunk_rows`` rows: when the block is full the
    loop calls :meth:`spill`, which writes its rows (derived channels computed, dtypes restored) as
    the part file ``telemetry.partNNNNN.npz`` in ``spill_dir`` and starts the block over
    (:attr:`base` = the first step it holds). :meth:`save` then streams the parts into one .npz — the
    same file, channel for channel, that an in-memory run writes — and :meth:`channels` returns that
    file's arrays memory-mapped. Memory use is flat in the run's duration. Every part is a complete
    .npz written atomically, so a run stopped by a full disk keeps every part that fit
    (:func:`load_parts` reads them).

    Args:
        n_steps: control steps of the run.
        nv: arm dof count.
        extra: additional scalar channels (e.g. ``ctrl_k_r_trans``) → unit.
        extra_shaped: additional channels with a per-step shape → (shape, unit) (e.g. hand joints).
        raw: hidden per-step block columns (name → width) that the recorder copies each step and
            turns into ``derived`` channels (:attr:`raw` holds their column views; they are not
            channels and are not saved).
        derived: channels of :data:`CHANNELS` that are not copied per step but computed from the
            ``raw`` columns by ``derive`` (e.g. quaternions from rotation matrices); they are
            separate arrays of the same shape.
        wallclock: hidden scalar block columns (name → unit) holding wall-clock measurements (e.g.
            ``ctrl_qp_solve_time``): recorded in the same row copy, but not channels — they differ
            from run to run, so they go to :meth:`timing_channels` / ``timing.npz``, never into the
            deterministic telemetry.
        derive: ``derive(tel, rows)`` fills the derived channels of the block's first ``rows`` rows
            from the raw columns (called before every spill and by :meth:`finish`).
        spill_dir: folder for the part files of a run longer than ``chunk_rows``; None = a private
            temporary folder (removed with this object).
        chunk_rows: rows of the block of a long run (tests use small values).
        recording: False = the loop records nothing (``telemetry.enabled: false``); :meth:`channels`
            is then empty and the steps are only counted.
    """

    def __init__(
        self,
        n_steps: int,
        nv: int,
        extra: dict[str, str] | None = None,
        extra_shaped: dict[str, tuple[tuple[int, ...], str]] | None = None,
        raw: dict[str, int] | None = None,
        derived: tuple[str, ...] = (),
        *,
        wallclock: dict[str, str] | None = None,
        derive: Callable[[Telemetry, int], None] | None = None,
        spill_dir: str | Path | None = None,
        chunk_rows: int = CHUNK_ROWS,
        recording: bool = True,
    ):
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
        self.n_steps = int(n_steps)
        self.recording = recording
        rows = self.n_steps if (self.n_steps <= chunk_rows or not recording) else chunk_rows
        if not recording:
            rows = 1  # the loop writes nothing; one row keeps the views well-formed
        #: rows of the block (the whole run when it fits, else ``chunk_rows``)
        self.capacity = rows
        self.n = 0
        #: first step held in the block (0 until the first spill)
        self.base = 0
        #: the step at which the block is full and :meth:`spill` must run (never, for a run that fits)
        self.spill_at = rows if self.n_steps > rows and recording else max(self.n_steps, 1)
        self.units: dict[str, str] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self._dtypes: dict[str, str] = {}
        self._derive = derive
        self._spill_dir = Path(spill_dir) if spill_dir is not None else None
        self._own_dir: Path | None = None
        self._parts: list[Path] = []
        self._assembled: Path | None = None
        self._finished = False
        self._timing_cache: dict[str, np.ndarray] | None = None
        widths: dict[str, int] = {}
        for name, (shape, dtype, unit, _doc) in CHANNELS.items():
            dims = tuple(nv if s == "nv" else s for s in shape)
            widths[name] = int(np.prod(dims)) if dims else 0  # 0 = scalar channel
            self._dtypes[name] = dtype
            self.units[name] = unit
        for name, unit in (extra or {}).items():
            widths[name] = 0
            self._dtypes[name] = "f8"
            self.units[name] = unit
        unknown = [name for name in derived if name not in CHANNELS]
        if unknown:
            raise ValueError(f"derived channels must be standard channels, got {unknown}")
        derived_widths = {name: widths.pop(name) for name in derived}
        raw = dict(raw or {})
        self.wallclock_units: dict[str, str] = dict(wallclock or {})
        #: block column order of the per-step row: row channels, then the wall-clock columns, then
        #: the raw columns
        self.row_channels: tuple[str, ...] = tuple(widths) + tuple(self.wallclock_units) + tuple(raw)
        total = sum(max(w, 1) for w in widths.values()) + len(self.wallclock_units) + sum(raw.values())
        self.block = np.zeros((rows, total))
        #: hidden raw columns (name → (rows, width) view of the block)
        self.raw: dict[str, np.ndarray] = {}
        #: hidden wall-clock columns (name → (rows,) view of the block)
        self.wallclock: dict[str, np.ndarray] = {}
        col = 0
        for name, w in widths.items():
            if w == 0:
                self.arrays[name] = self.block[:, col]
                col += 1
            else:
                self.arrays[name] = self.block[:, col : col + w]
                col += w
        for name in self.wallclock_units:
            self.wallclock[name] = self.block[:, col]
            col += 1
        for name, w in raw.items():
            self.raw[name] = self.block[:, col : col + w]
            col += w
        for name, w in derived_widths.items():
            self.arrays[name] = np.zeros(rows) if w == 0 else np.zeros((rows, w))
        for name, (shape, unit) in (extra_shaped or {}).items():
            self.arrays[name] = np.zeros((rows,) + tuple(shape))
            self.units[name] = unit
        # direct attribute access (tests, tools) to the block's arrays (the whole run when it fits)
        for name, arr in self.arrays.items():
            setattr(self, name, arr)

    # ------------------------------------------------------------------------------ sizes
    @staticmethod
    def bytes_per_step(
        nv: int,
        extra: dict[str, str] | None = None,
        extra_shaped: dict[str, tuple[tuple[int, ...], str]] | None = None,
    ) -> int:
        """Bytes one control step takes in telemetry.npz (every channel), for size estimates."""
        total = 0
        for shape, dtype, _unit, _doc in CHANNELS.values():
            dims = [nv if d == "nv" else d for d in shape]
            total += int(np.prod(dims, dtype=np.int64)) * np.dtype(dtype).itemsize
        total += 8 * len(extra or {})
        total += sum(8 * int(np.prod(shape, dtype=np.int64)) for shape, _u in (extra_shaped or {}).values())
        return total

    @property
    def spilled(self) -> bool:
        """True once part files exist (a run longer than the block)."""
        return bool(self._parts)

    @property
    def parts(self) -> tuple[Path, ...]:
        return tuple(self._parts)

    def _rows_now(self) -> int:
        return (self.n - self.base) if self.recording else 0

    # ------------------------------------------------------------------------------ the loop's hooks
    def spill(self, i: int) -> int:
        """Called by the loop at step ``i == spill_at`` (the block is full): write the block's rows as a
        part file, start the block over at step ``i``. Returns the next ``spill_at``.

        Raises:
            TelemetryWriteError: the part could not be written (the block is kept: nothing recorded
                is lost by the failed write itself).
        """
        from dockbench.sim.interrupts import deferred

        rows = i - self.base
        with deferred():  # a signal now raises after the part is written and counted, never between
            self._write_part(rows)
            self.base = i
            self.spill_at = i + self.capacity
        return self.spill_at

    def _write_part(self, rows: int) -> None:
        if self._derive is not None:
            self._derive(self, rows)
        folder = self._folder()
        path = folder / f"telemetry.part{len(self._parts):05d}.npz"
        arrays = self._block_channels(rows)
        for name, col in self.wallclock.items():
            arrays[_TIMING_PREFIX + name] = col[:rows]
        arrays["__first_step__"] = np.array(self.base, dtype=np.int64)
        try:
            atomic_save_npz(path, arrays)
        except OSError as exc:
            raise TelemetryWriteError(
                exc.errno, f"could not write telemetry part {path}: {exc.strerror or exc}"
            ) from exc
        self._parts.append(path)

    def _folder(self) -> Path:
        if self._spill_dir is not None:
            return self._spill_dir
        if self._own_dir is None:
            self._own_dir = Path(tempfile.mkdtemp(prefix="dockbench_telemetry_"))
            weakref.finalize(self, shutil.rmtree, str(self._own_dir), True)
        return self._own_dir

    def finish(self) -> None:
        """After the loop (runs once): derive the channels of the rows still in the block and, for a
        spilled run, write them as the last part (a failure raises :class:`TelemetryWriteError`; the
        telemetry is then the parts written before)."""
        if self._finished:
            return
        self._finished = True  # once: after a failed last part, the parts written are what is kept
        rows = self._rows_now()
        if rows > 0 and self._derive is not None and not self._parts:
            self._derive(self, rows)
        if self._parts and rows > 0:
            from dockbench.sim.interrupts import deferred

            with deferred():
                self._write_part(rows)
                self.base = self.n

    # ------------------------------------------------------------------------------ reading
    def _block_channels(self, rows: int) -> dict[str, np.ndarray]:
        out = {}
        for k, v in self.arrays.items():
            dtype = self._dtypes.get(k, "f8")
            out[k] = v[:rows] if dtype == "f8" else v[:rows].astype(dtype)
        return out

    def channels(self) -> dict[str, np.ndarray]:
        """The recorded steps of every channel: for a run held in memory the first ``n`` rows (float
        channels as views, bool and integer channels converted to their dtype); for a spilled run the
        arrays of the assembled .npz, memory-mapped (assembled on first use)."""
        if not self._parts:
            return self._block_channels(self._rows_now())
        self.finish()
        if self._assembled is None:
            self.save(self._folder() / "telemetry.npz")
        assert self._assembled is not None
        return load_npz(self._assembled, mmap=True)

    def timing_channels(self) -> dict[str, np.ndarray]:
        """The wall-clock columns of the recorded steps (name → (n,) array) — not telemetry."""
        if not self._parts:
            rows = self._rows_now()
            return {k: v[:rows] for k, v in self.wallclock.items()}
        if self._timing_cache is None:
            self.finish()
            pieces: dict[str, list[np.ndarray]] = {k: [] for k in self.wallclock}
            for part in self._parts:
                with np.load(part) as z:
                    for k in pieces:
                        pieces[k].append(z[_TIMING_PREFIX + k])
            self._timing_cache = {k: np.concatenate(v) if v else np.zeros(0) for k, v in pieces.items()}
        return self._timing_cache

    def save(self, path: str | Path) -> None:
        """Write the recorded steps to ``path`` (.npz) atomically (temp file + rename). A spilled run
        is streamed from its part files, one channel at a time (memory: one part), and the parts are
        removed once the file is in place."""
        path = Path(path)
        if not self._parts:
            atomic_save_npz(path, self.channels())
            return
        self.finish()
        if self._assembled is not None and self._assembled.exists():
            if self._assembled.resolve() != path.resolve():
                atomic_copy(self._assembled, path)
            return
        assemble_parts(self._parts, path)
        self._assembled = path
        self.timing_channels()  # read the wall-clock columns before their parts go
        for part in self._parts:
            with contextlib.suppress(OSError):
                part.unlink()

    def save_timing(self, path: str | Path) -> None:
        """Write the wall-clock columns (``timing.npz``; nothing when there are none)."""
        timing = self.timing_channels()
        if timing:
            atomic_save_npz(path, timing)


def _npy_header(arr_shape: tuple[int, ...], dtype: np.dtype) -> dict:
    return {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": arr_shape}


def assemble_parts(parts: list[Path] | tuple[Path, ...], path: str | Path) -> None:
    """Stream the channels of consecutive part files into one .npz at ``path`` (atomically): the same
    layout as ``np.savez`` (uncompressed members ``<name>.npy``), each channel the concatenation of
    its pieces in part order. Memory: one channel of one part at a time."""
    path = Path(path)
    with np.load(parts[0]) as z0:
        names = [k for k in z0.files if not k.startswith("__")]
        shapes = {k: z0[k].shape[1:] for k in names}
        dtypes = {k: z0[k].dtype for k in names}
    rows = []
    for part in parts:
        with np.load(part) as z:
            first = int(z["__first_step__"])
            if first != sum(rows):
                raise ValueError(f"{part}: starts at step {first}, the parts before it end at {sum(rows)}")
            rows.append(int(z[names[0]].shape[0]) if names else 0)
    total = sum(rows)
    with (
        atomic_path(path, ".npz.tmp") as (fd, _),
        os.fdopen(fd, "wb") as fh,
        zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as zf,
    ):
        for name in names:
            with zf.open(name + ".npy", "w", force_zip64=True) as out:
                np.lib.format.write_array_header_1_0(out, _npy_header((total, *shapes[name]), dtypes[name]))
                for part in parts:
                    with np.load(part) as z:
                        piece = np.ascontiguousarray(z[name], dtype=dtypes[name])
                    out.write(piece.data if piece.size else b"")


def load_parts(folder: str | Path) -> dict[str, np.ndarray]:
    """The channels of the part files in ``folder`` (a run stopped before its telemetry.npz was
    written), concatenated in step order; parts that cannot be read, and every part after a gap,
    are left out. Empty when there are none."""
    pieces: dict[str, list[np.ndarray]] = {}
    expected = 0
    for part in part_files(folder):
        try:
            with np.load(part) as z:
                first = int(z["__first_step__"])
                arrays = {k: z[k] for k in z.files if not k.startswith("__")}
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError):
            break
        if first != expected or not arrays:
            break
        for k, v in arrays.items():
            pieces.setdefault(k, []).append(v)
        expected = first + len(next(iter(arrays.values())))
    return {k: np.concatenate(v) for k, v in pieces.items()}


def part_files(folder: str | Path) -> list[Path]:
    """The part files in ``folder``, in step order."""

    def index(p: Path) -> int:
        digits = p.name.removeprefix("telemetry.part").removesuffix(".npz")
        return int(digits) if digits.isdigit() else -1

    return sorted((p for p in Path(folder).glob(PART_GLOB) if index(p) >= 0), key=index)


def load_npz(path: str | Path, *, mmap: bool = False) -> dict[str, np.ndarray]:
    """The arrays of an .npz. With ``mmap=True`` the uncompressed members of at least
    :data:`MMAP_MIN_BYTES` are memory-mapped copy-on-write (writable, the file is never modified;
    memory is only taken for what is read), the others are read.

    Raises:
        OSError, ValueError, zipfile.BadZipFile: the file is missing, truncated or not an .npz.
    """
    path = Path(path)
    if not mmap:
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as zf, open(path, "rb") as fh:
        for info in zf.infolist():
            name = info.filename.removesuffix(".npy")
            if info.compress_type != zipfile.ZIP_STORED or info.file_size < MMAP_MIN_BYTES:
                with zf.open(info) as member:
                    out[name] = np.lib.format.read_array(member, allow_pickle=False)
                continue
            fh.seek(info.header_offset)
            local = fh.read(30)
            if local[:4] != b"PK\x03\x04":
                raise zipfile.BadZipFile(f"{path}: bad local header for {info.filename}")
            n_name, n_extra = struct.unpack("<HH", local[26:30])
            fh.seek(info.header_offset + 30 + n_name + n_extra)
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
            offset = fh.tell()
            if int(np.prod(shape, dtype=np.int64)) == 0:
                out[name] = np.zeros(shape, dtype=dtype)
                continue
            mm = np.memmap(path, dtype=dtype, mode="c", offset=offset, shape=shape, order="F" if fortran else "C")
            out[name] = mm.view(np.ndarray)
    return out


#: mode of the files dockbench writes: what a plain open() gives (0666 less the umask), not mkstemp's 0600
_UMASK = os.umask(0)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK


@contextlib.contextmanager
def atomic_path(path: str | Path, suffix: str = ".tmp") -> Iterator[tuple[int, str]]:
    """A temporary file beside ``path`` (its folder created if needed), yielded as ``(fd, name)``: when the
    block ends without an exception it replaces ``path`` in one rename, else it is removed and the
    exception propagates (``path`` is never half written). The block owns ``fd`` (``os.fdopen`` it, or close
    it). The file gets :data:`FILE_MODE`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=suffix)
    try:
        os.fchmod(fd, FILE_MODE)
        yield fd, tmp
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_copy(src: str | Path, dst: str | Path) -> None:
    """Copy ``src`` to ``dst`` atomically (temp file + rename)."""
    with atomic_path(dst) as (fd, _), os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
        shutil.copyfileobj(inp, out, 16 << 20)


def atomic_save_npz(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez`` of ``arrays`` to ``path`` atomically (temp file + rename)."""
    with atomic_path(path, ".npz.tmp") as (fd, _), os.fdopen(fd, "wb") as fh:
        np.savez(fh, **arrays)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file + rename)."""
    with atomic_path(path) as (fd, _), os.fdopen(fd, "w") as fh:
        fh.write(text)

"""DiLoCo and Streaming DiLoCo over a pccl.Communicator (docs/diloco.md).

    diloco = DiLoCo(model, outer_optimizer, comm, sync_every=50)     # torch
    for x, y in data:
        loss_fn(model(x), y).backward(); inner.step(); inner.zero_grad()
        diloco.step()

Every `sync_every` inner steps (per fragment, staggered, with `fragments > 1`) the peers average
their pseudo-gradients (outer weights - inner weights) with one all-reduce and apply them with the
outer optimizer. The outer weights, the outer optimizer's state and the step counter are shared
state: a newcomer receives them, and members stay bit-identical. Every failure the library reports
is handled here (a topology round, the step dropped by every survivor alike, the revision rule).

`NumpyDiLoCo(params, comm, outer_lr=..., ...)` is the same outer loop over numpy arrays, with a
built-in outer SGD (Nesterov) in numpy; it needs no torch.

Importing this module imports numpy; torch only when a torch model is given.
"""
import hashlib
import logging
import time

import numpy as np

from pccl._api import QuantizationOptions
from pccl._enums import Attribute, DataType, PCCLError, QuantizationAlgorithm, ReduceOp, Result

log = logging.getLogger("pccl.diloco")

__all__ = ["Compression", "DiLoCo", "NumpyDiLoCo", "OuterSGD", "SyncRecord"]

# What a training loop answers with a topology round (docs/failures.md).
_RECOVER = (Result.RANK_CONNECTION_LOST, Result.RANK_CONNECTION_FAILED, Result.COLLECTIVE_TIMEOUT,
            Result.TOO_FEW_PEERS, Result.MASTER_CONNECTION_FAILED)

# Elements per quantized frame of the library's ring (256 KiB of float32, reduce/README.md): the
# block the error feedback's local model of the quantizer uses.
_QUANT_BLOCK = 65536


class Compression:
    """How the outer all-reduce moves the pseudo-gradient.

    kind: "uint8" / "uint16" (the library's quantized all-reduce; algorithm "min_max" or
    "zero_point_scale"), "bf16" (torch only: numpy has no bfloat16) or "fp16" (sent in that type).
    error_feedback: add the error of the last compression of this peer's own pseudo-gradient to
    the next one (the error is computed locally; see docs/diloco.md for what it covers)."""

    KINDS = ("uint8", "uint16", "bf16", "fp16")

    def __init__(self, kind="uint8", algorithm="min_max", error_feedback=True):
        if kind not in self.KINDS:
            raise ValueError(f"compression kind must be one of {self.KINDS}, not {kind!r}")
        if algorithm not in ("min_max", "zero_point_scale"):
            raise ValueError(f"algorithm must be 'min_max' or 'zero_point_scale', not {algorithm!r}")
        self.kind = kind
        self.algorithm = algorithm
        self.error_feedback = bool(error_feedback)

    @classmethod
    def of(cls, value):
        """None, a Compression, or a kind string ("uint8", "uint8:zps", "bf16", ...; "+noef"
        turns error feedback off, e.g. "uint8+noef")."""
        if value is None or isinstance(value, Compression):
            return value
        if not isinstance(value, str):
            raise ValueError(f"compression must be None, a str or a Compression, not {value!r}")
        ef = not value.endswith("+noef")
        value = value[:-5] if not ef else value
        kind, _, algo = value.partition(":")
        return cls(kind, {"": "min_max", "minmax": "min_max", "min_max": "min_max", "zps": "zero_point_scale",
                          "zero_point_scale": "zero_point_scale"}.get(algo, algo), ef)

    @property
    def quantized(self):
        return self.kind in ("uint8", "uint16")

    def options(self):
        if not self.quantized:
            return None
        return QuantizationOptions(DataType.UINT8 if self.kind == "uint8" else DataType.UINT16,
                                   QuantizationAlgorithm.MIN_MAX if self.algorithm == "min_max"
                                   else QuantizationAlgorithm.ZERO_POINT_SCALE)

    def __repr__(self):
        return f"Compression({self.kind!r}, {self.algorithm!r}, error_feedback={self.error_feedback})"


def _model_quantize(x, bits, algorithm, out):
    """out = dequant(quant(x)) with the library's formulas in float32, per block of _QUANT_BLOCK
    elements from the start of x (the ring cuts its frames per chunk, so frame boundaries differ
    by world size: this is a model of the first quantization, not a replay of the ring)."""
    top = np.float32(2 ** bits - 1)
    for s in range(0, x.size, _QUANT_BLOCK):
        b = x[s:s + _QUANT_BLOCK]
        o = out[s:s + _QUANT_BLOCK]
        lo, hi = np.float32(b.min()), np.float32(b.max())
        if algorithm == "min_max":
            step = (hi - lo) / top
            if step == 0:
                o.fill(lo)
                continue
            c = np.clip(np.rint((b - lo) * (np.float32(1) / step)), 0, top)
            np.clip(c * step + lo, lo, hi, out=o)
        else:
            lo, hi = min(lo, np.float32(0)), max(hi, np.float32(0))
            scale = (hi - lo) / top
            if scale == 0:
                o.fill(0)
                continue
            z = np.float32(np.rint(np.clip(-lo / scale, 0, top)))
            c = np.clip(np.rint(b * (np.float32(1) / scale) + z), 0, top)
            np.multiply(c - z, scale, out=o)
    return out


class SyncRecord:
    """One outer step of one fragment as this peer saw it."""
    __slots__ = ("step", "fragment", "world", "ok", "result", "elements", "tx_bytes", "rx_bytes",
                 "ss_tx_bytes", "ss_rx_bytes", "seconds")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return "SyncRecord(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


class _Fragment:
    """A slice of the model: its parameters, its outer weights (one flat buffer, shared state) and
    the buffers its outer all-reduce uses."""

    def __init__(self, index, params, sizes):
        self.index = index
        self.params = params
        self.sizes = sizes
        self.offsets = np.cumsum([0] + sizes).tolist()
        self.n = int(sum(sizes))
        self.outer = None  # numpy view of the flat outer weights
        self.pg = None  # float32 pseudo-gradient (the all-reduce buffer when uncompressed or quantized)
        self.err = None  # error feedback carried to the next outer step
        self.err_next = None
        self.wire = None  # fp16/bf16 send buffer


class _Pending:
    __slots__ = ("fragment", "handle", "due", "record", "t0")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))


class _Engine:
    """The outer loop, written once over flat numpy buffers; DiLoCo (torch) and NumpyDiLoCo say how
    to read the inner weights, write them back and take an outer optimizer step."""

    def _setup(self, comm, sync_every, fragments, delay, compression, alpha, tag_base):
        sync_every, fragments, delay = int(sync_every), int(fragments), int(delay)
        if sync_every < 1 or fragments < 1 or sync_every % fragments:
            raise ValueError(f"sync_every ({sync_every}) must be a positive multiple of fragments ({fragments})")
        self.interval = sync_every // fragments  # inner steps between two fragments' syncs
        if not 0 <= delay <= self.interval:
            raise ValueError(f"delay must be in [0, sync_every / fragments = {self.interval}], not {delay}")
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"alpha must be in [0, 1), not {alpha}")
        self.comm = comm
        self.sync_every = sync_every
        self.n_fragments = fragments
        self.delay = delay
        self.alpha = float(alpha)
        self._compression = Compression.of(compression)
        self._pending = None
        self.fragments = []
        self.tag_base = int(tag_base)
        self.history = []  # SyncRecord per outer step (fragment) this peer took part in
        self.topology_updates = 0
        self.diverged_fetches = 0  # syncs where a member had to fetch outer state: must stay 0
        self.joined_at = None  # the step at which this peer's first sync happened
        self._step = np.zeros(1, np.int64)  # shared: a newcomer carries on from the group's step
        self._revision = 0
        self._synced = False
        self._broken = False

    # -- public --

    @property
    def compression(self):
        return self._compression

    @compression.setter
    def compression(self, value):
        """Another compression for the next outer all-reduces (none may be in flight: call it
        right after a step() that returned records, or after finish()); error feedback starts over."""
        if self._pending is not None:
            raise ValueError("an outer all-reduce is in flight; change the compression after finish()")
        value = Compression.of(value)
        if value is not None and value.kind == "bf16" and isinstance(self, NumpyDiLoCo):
            raise ValueError("numpy has no bfloat16: use 'fp16' or a quantized compression")
        self._compression = value
        self._allocate()

    @property
    def inner_step(self):
        """Inner steps taken by the group (shared: a newcomer continues from the others')."""
        return int(self._step[0])

    @property
    def bytes_sent(self):
        return sum(r.tx_bytes or 0 for r in self.history)

    @property
    def bytes_received(self):
        return sum(r.rx_bytes or 0 for r in self.history)

    def step(self):
        """Call once per inner optimizer step. Returns the SyncRecords of the outer steps that
        finished in this call (usually none)."""
        self._step[0] += 1
        t = int(self._step[0])
        done = []
        p = self._pending
        if p is not None and t >= p.due:
            done.append(self._finish(p))
        if t % self.interval == 0:
            r = self._sync_point()
            if r is not None:
                done.append(r)
        return done

    def finish(self):
        """Awaits an outer all-reduce still in flight (delay > 0) and applies it; no other
        collective is called. Call it after the last step(), before comparing or saving."""
        p = self._pending
        return [self._finish(p)] if p is not None else []

    def outer_hash(self):
        """sha256 of the outer weights, the outer optimizer state and the step (hex): equal on
        every member after every step()."""
        h = hashlib.sha256()
        for name, arr in self._shared_arrays():
            h.update(name.encode())
            h.update(np.ascontiguousarray(arr).view(np.uint8).tobytes())
        return h.hexdigest()

    def join(self):
        """The first sync (the constructor calls it): takes part in the group's next outer step
        boundary, receives the shared state when behind, and copies the outer weights into the
        model. A newcomer that arrives at a fragment's sync contributes a zero pseudo-gradient."""
        return self._sync_point()

    # -- the cycle --

    def _fragment_at(self, t):
        """Which fragment syncs at inner step t (a multiple of interval), or None at step 0."""
        if t <= 0:
            return None
        return (t // self.interval - 1) % self.n_fragments

    def _update_topology(self):
        misuse = 0
        while True:
            try:
                self.comm.update_topology()
                self.topology_updates += 1
                self._broken = False
                return
            except PCCLError as e:
                if e.result is Result.UPDATE_TOPOLOGY_FAILED:
                    time.sleep(0.01)
                    continue
                if e.result is Result.INVALID_USAGE and misuse < 3:
                    # The misuse case of the collective timeout (docs/failures.md): this peer voted
                    # while others waited in an all-reduce; when it timed out both sides vote again.
                    misuse += 1
                    continue
                raise  # MASTER_CONNECTION_FAILED here: the master is gone for good

    def _recoverable(self, e):
        if e.result not in _RECOVER:
            raise e
        log.info("diloco: %s; topology round next", e)
        self._broken = True

    def _sync_shared_state(self):
        """Membership, then the shared-state sync; returns (world, SharedStateSyncInfo)."""
        from pccl._api import SharedState, TensorInfo
        while True:
            try:
                if self._broken or self.comm.are_peers_pending():
                    self._update_topology()
                    continue  # everyone (the admitted too) asks again
                world = self.comm.get_attribute(Attribute.LOCAL_WORLD_SIZE)
                infos = [TensorInfo.from_torch(a, n) if self._is_torch(a) else TensorInfo.from_numpy(a, n)
                         for n, a in self._shared_tensors()]
                state = SharedState(infos)
                # The revision rule: the last successful one + 1; a newcomer gives 0 and is behind.
                state.revision = self._revision + 1 if self._synced else 0
                first = not self._synced
                info = self.comm.sync_shared_state(state)
                self._revision = state.revision
                self._synced = True
                if first:
                    self.joined_at = self.inner_step
                    self._all_inner_from_outer()
                elif info.rx_bytes:
                    # A member's outer state differed from the group's: a bug if it ever happens.
                    self.diverged_fetches += 1
                    log.warning("diloco: step %d: fetched %d B of outer state as a member", self.inner_step,
                                info.rx_bytes)
                    self._all_inner_from_outer()
                return world, info
            except PCCLError as e:
                self._recoverable(e)

    def _sync_point(self):
        t0 = time.monotonic()
        world, ss = self._sync_shared_state()
        t = self.inner_step  # a newcomer has the group's step now
        f = self._fragment_at(t) if t % self.interval == 0 else None
        if f is None:
            return None
        fr = self.fragments[f]
        rec = SyncRecord(step=t, fragment=f, world=world, ok=None, elements=fr.n, tx_bytes=0, rx_bytes=0,
                         ss_tx_bytes=ss.tx_bytes, ss_rx_bytes=ss.rx_bytes)
        fresh = self.joined_at == t  # joined at this very boundary: nothing trained yet
        if fresh:
            fr.pg.fill(0)
        else:
            self._pseudo_gradient(fr)
        send = self._encode(fr)
        if world < 2:  # alone: the average of one, exactly (no wire, no compression error)
            rec.ok, rec.result = True, "alone"
            if fr.err is not None:
                fr.err_next.fill(0)
            self._apply(fr, rec, world)
            rec.seconds = time.monotonic() - t0
            self.history.append(rec)
            return rec
        opts = self.compression.options() if self.compression else None
        tag = self.tag_base + t
        try:
            if self.delay == 0:
                info = self.comm.all_reduce(send, send, op=ReduceOp.AVG, tag=tag, quantization_options=opts)
            else:
                h = self.comm.all_reduce_async(send, send, op=ReduceOp.AVG, tag=tag, quantization_options=opts)
                self._pending = _Pending(fragment=fr, handle=h, due=t + self.delay, record=rec, t0=t0)
                return None
        except PCCLError as e:
            self._recoverable(e)
            self._drop(fr, rec, e.result)
            rec.seconds = time.monotonic() - t0
            self.history.append(rec)
            return rec
        rec.tx_bytes, rec.rx_bytes = info.tx_bytes, info.rx_bytes
        rec.ok, rec.result = True, "ok"
        self._apply(fr, rec, info.local_world_size)
        rec.seconds = time.monotonic() - t0
        self.history.append(rec)
        return rec

    def _finish(self, p):
        self._pending = None
        ok, status, info = p.handle.wait()
        rec, fr = p.record, p.fragment
        if ok:
            rec.tx_bytes, rec.rx_bytes = info.tx_bytes, info.rx_bytes
            rec.ok, rec.result = True, "ok"
            self._apply(fr, rec, info.local_world_size)
        else:
            self._recoverable(PCCLError(status, "pcclAwaitAsyncReduce"))
            self._drop(fr, rec, Result(status) if isinstance(status, int) else status)
        rec.seconds = time.monotonic() - p.t0
        self.history.append(rec)
        return rec

    def _drop(self, fr, rec, result):
        """Every member of a failed all-reduce sees the failure: each drops this outer step alike
        (outer weights unchanged; the fragment's inner weights go back to them)."""
        rec.ok, rec.result = False, getattr(result, "name", str(result))
        self._inner_from_outer(fr, 0.0)
        log.info("diloco: step %d fragment %d: outer all-reduce failed (%s); dropped", rec.step, fr.index,
                 rec.result)

    def _encode(self, fr):
        """The buffer the all-reduce sends: pg (+ error feedback), compressed as configured; sets
        err_next to what this compression loses of it."""
        c = self.compression
        if fr.err is not None:
            fr.pg += fr.err
        if c is None:
            return fr.pg
        if c.quantized:
            if fr.err is not None:
                _model_quantize(fr.pg, 8 if c.kind == "uint8" else 16, c.algorithm, fr.err_next)
                np.subtract(fr.pg, fr.err_next, out=fr.err_next)
            return fr.pg
        self._cast_to_wire(fr)
        if fr.err is not None:
            np.subtract(fr.pg, self._wire_as_float(fr), out=fr.err_next)
        return fr.wire

    def _apply(self, fr, rec, world):
        """The all-reduce succeeded: the average is in the send buffer; take the outer step."""
        c = self.compression
        if c is not None and not c.quantized:
            if rec.result == "alone":
                pass  # pg holds the exact value
            else:
                fr.pg[...] = self._wire_as_float(fr)
        if fr.err is not None:
            fr.err, fr.err_next = fr.err_next, fr.err
        self._outer_step(fr)
        self._inner_from_outer(fr, self.alpha)

    def _allocate(self):
        c = self.compression
        for fr in self.fragments:
            fr.pg = np.zeros(fr.n, np.float32)
            fr.err = fr.err_next = fr.wire = None
            if c is not None and c.error_feedback:
                fr.err = np.zeros(fr.n, np.float32)
                fr.err_next = np.zeros(fr.n, np.float32)
            if c is not None and not c.quantized:
                fr.wire = self._make_wire(fr.n, c.kind)

    def _all_inner_from_outer(self):
        for fr in self.fragments:
            self._inner_from_outer(fr, 0.0)
            if fr.err is not None:
                fr.err.fill(0)

    @staticmethod
    def _is_torch(a):
        return not isinstance(a, np.ndarray)

    def _shared_arrays(self):
        for name, a in self._shared_tensors():
            # torch tensors as their bytes (numpy has no bfloat16)
            yield name, a if isinstance(a, np.ndarray) else a.detach().reshape(-1).view(self._torch.uint8).numpy()


def _split(sizes, k):
    """Cuts a list of parameter sizes into k contiguous non-empty groups whose largest total is as
    small as possible (binary search on that total, then greedy packing)."""
    if len(sizes) < k:
        raise ValueError(f"{k} fragments need at least {k} parameter tensors, the model has {len(sizes)}")

    def pack(cap):
        groups, cur, acc = [], [], 0
        for i, s in enumerate(sizes):
            if cur and acc + s > cap:
                groups.append(cur)
                cur, acc = [], 0
            cur.append(i)
            acc += s
        groups.append(cur)
        return groups

    lo, hi = max(sizes), sum(sizes)
    while lo < hi:
        mid = (lo + hi) // 2
        if len(pack(mid)) <= k:
            hi = mid
        else:
            lo = mid + 1
    groups = pack(lo)
    while len(groups) < k:  # fewer groups than asked: split the largest one that has two tensors
        j = max((g for g in range(len(groups)) if len(groups[g]) > 1),
                key=lambda g: sum(sizes[i] for i in groups[g]))
        g = groups[j]
        groups[j:j + 1] = [g[:len(g) // 2], g[len(g) // 2:]]
    return groups


class DiLoCo(_Engine):
    """DiLoCo / Streaming DiLoCo over a torch model (CPU tensors).

    model: a torch.nn.Module (or a list of parameters); its parameters are the inner weights.
    outer_optimizer: a torch optimizer over those same parameters (e.g. SGD(lr=0.7, momentum=0.9,
      nesterov=True)); its state tensors are shared, so they must be tensors (SGD, Adam, AdamW...).
    communicator: a connected pccl.Communicator.
    sync_every: H, inner steps between two outer steps of one fragment.
    fragments: Streaming DiLoCo's fragment count (parameters cut into this many contiguous groups
      of about equal size; one fragment syncs every sync_every / fragments steps, in turn).
    delay: inner steps between starting a fragment's outer all-reduce and applying it (0: blocking;
      1..sync_every/fragments: overlapped with those inner steps).
    compression: None, a Compression, or "uint8", "uint8:zps", "uint16", "bf16", "fp16"
      ("+noef" at the end: without error feedback).
    alpha: with delay > 0, the fragment's new inner weights are alpha * inner + (1 - alpha) * outer
      (Streaming DiLoCo's mixing; 0 takes the outer weights).
    join: run the first sync now (default); False: call join() yourself before the first step().
    """

    def __init__(self, model, outer_optimizer, communicator, sync_every, fragments=1, delay=0, compression=None,
                 alpha=0.0, tag_base=1 << 32, join=True):
        import torch
        self._torch = torch
        self._setup(communicator, sync_every, fragments, delay, compression, alpha, tag_base)
        params = list(model.parameters()) if hasattr(model, "parameters") else list(model)
        if not params:
            raise ValueError("the model has no parameters")
        dtype = params[0].dtype
        for p in params:
            if p.dtype != dtype or p.device.type != "cpu" or not p.dtype.is_floating_point:
                raise ValueError("DiLoCo needs CPU parameters of one floating dtype")
        if dtype != torch.float32:
            raise ValueError(f"DiLoCo keeps float32 outer weights; the model is {dtype}")
        self.model_params = params
        self.outer_optimizer = outer_optimizer
        self.fragments = []
        for k, idx in enumerate(_split([p.numel() for p in params], self.n_fragments)):
            ps = [params[i] for i in idx]
            fr = _Fragment(k, ps, [p.numel() for p in ps])
            fr.outer_t = torch.empty(fr.n, dtype=torch.float32)
            fr.outer = fr.outer_t.numpy()
            fr.views = [fr.outer_t[fr.offsets[i]:fr.offsets[i + 1]].view_as(p) for i, p in enumerate(ps)]
            with torch.no_grad():
                for v, p in zip(fr.views, ps):
                    v.copy_(p)
            self.fragments.append(fr)
        self._allocate()
        self._prime_optimizer()
        if join:
            self.join()

    def _prime_optimizer(self):
        """One outer step with zero gradients creates the optimizer's state tensors (so that every
        peer shares the same set from the start); floating state is zeroed afterwards and the outer
        weights are restored (weight decay would have moved them)."""
        torch = self._torch
        backup = [fr.outer.copy() for fr in self.fragments]
        self._run_outer_optimizer(self.model_params, [torch.zeros_like(p) for p in self.model_params])
        for fr, b in zip(self.fragments, backup):
            fr.outer[...] = b
        self._state_names = []
        index = {id(p): i for i, p in enumerate(self.model_params)}
        for p in self.model_params:
            st = self.outer_optimizer.state.get(p, {})
            for key in sorted(st):
                v = st[key]
                if not isinstance(v, torch.Tensor):
                    raise ValueError(f"outer optimizer state {key!r} is not a tensor; it cannot be shared")
                if v.is_floating_point():
                    v.zero_()
                self._state_names.append((f"diloco.opt.{index[id(p)]}.{key}", p, key))

    def _run_outer_optimizer(self, params, grads):
        """outer_optimizer.step() on `params` with their .data pointing at the outer weights and
        their grads `grads`; every other parameter's grad hidden, everything restored after."""
        torch = self._torch
        saved_grads = [p.grad for p in self.model_params]
        chosen = {id(p): g for p, g in zip(params, grads)}
        saved_data = {}
        for p in self.model_params:
            p.grad = chosen.get(id(p))
        for fr in self.fragments:
            for v, p in zip(fr.views, fr.params):
                if id(p) in chosen:
                    saved_data[id(p)] = p.data
                    p.data = v
        try:
            with torch.no_grad():
                self.outer_optimizer.step()
        finally:
            for fr in self.fragments:
                for p in fr.params:
                    if id(p) in saved_data:
                        p.data = saved_data[id(p)]
            for p, g in zip(self.model_params, saved_grads):
                p.grad = g

    def outer_tensors(self):
        """The outer weights, one tensor per model parameter in the model's order (views: do not
        write them)."""
        return [v for fr in self.fragments for v in fr.views]

    def _shared_tensors(self):
        out = [(f"diloco.outer.{fr.index}", fr.outer_t) for fr in self.fragments]
        for name, p, key in self._state_names:
            out.append((name, self.outer_optimizer.state[p][key]))
        out.append(("diloco.step", self._step))
        return out

    def _pseudo_gradient(self, fr):
        torch = self._torch
        pg = torch.from_numpy(fr.pg)
        with torch.no_grad():
            for i, p in enumerate(fr.params):
                torch.sub(fr.views[i].reshape(-1), p.detach().reshape(-1), out=pg[fr.offsets[i]:fr.offsets[i + 1]])

    def _inner_from_outer(self, fr, alpha):
        torch = self._torch
        with torch.no_grad():
            for v, p in zip(fr.views, fr.params):
                if alpha:
                    p.mul_(alpha).add_(v, alpha=1.0 - alpha)
                else:
                    p.copy_(v)

    def _outer_step(self, fr):
        pg = self._torch.from_numpy(fr.pg)
        self._run_outer_optimizer(fr.params, [pg[fr.offsets[i]:fr.offsets[i + 1]].view_as(p)
                                              for i, p in enumerate(fr.params)])

    def _make_wire(self, n, kind):
        torch = self._torch
        return torch.zeros(n, dtype=torch.bfloat16 if kind == "bf16" else torch.float16)

    def _cast_to_wire(self, fr):
        fr.wire.copy_(self._torch.from_numpy(fr.pg))

    def _wire_as_float(self, fr):
        return fr.wire.float().numpy()


class OuterSGD:
    """The outer optimizer of NumpyDiLoCo: SGD with (Nesterov) momentum, as torch.optim.SGD
    computes it: buf = momentum * buf + g; g = g + momentum * buf (Nesterov) or buf; w -= lr * g."""

    def __init__(self, lr=0.7, momentum=0.9, nesterov=True):
        self.lr, self.momentum, self.nesterov = np.float32(lr), np.float32(momentum), bool(nesterov)

    def state_for(self, n):
        return {"momentum": np.zeros(n, np.float32)} if self.momentum else {}

    def step(self, w, g, state):
        if self.momentum:
            buf = state["momentum"]
            buf *= self.momentum
            buf += g
            if self.nesterov:
                g = g + self.momentum * buf
            else:
                g = buf
        w -= self.lr * g


class NumpyDiLoCo(_Engine):
    """DiLoCo over numpy arrays (no torch): `params` is a list of float32 arrays that the inner
    loop updates in place; `outer` an OuterSGD. Other arguments as DiLoCo's."""

    def __init__(self, params, communicator, sync_every, fragments=1, delay=0, compression=None, outer=None,
                 alpha=0.0, tag_base=1 << 32, join=True):
        self._setup(communicator, sync_every, fragments, delay, compression, alpha, tag_base)
        if self.compression is not None and self.compression.kind == "bf16":
            raise ValueError("numpy has no bfloat16: use 'fp16' or a quantized compression")
        params = list(params)
        for p in params:
            if not isinstance(p, np.ndarray) or p.dtype != np.float32 or not p.flags["C_CONTIGUOUS"]:
                raise ValueError("NumpyDiLoCo needs C-contiguous float32 numpy arrays")
        self.model_params = params
        self.outer_optimizer = outer or OuterSGD()
        self.fragments = []
        for k, idx in enumerate(_split([p.size for p in params], self.n_fragments)):
            ps = [params[i] for i in idx]
            fr = _Fragment(k, ps, [p.size for p in ps])
            fr.outer = np.concatenate([p.reshape(-1) for p in ps]).astype(np.float32)
            fr.state = self.outer_optimizer.state_for(fr.n)
            self.fragments.append(fr)
        self._allocate()
        if join:
            self.join()

    def outer_tensors(self):
        """The outer weights, one array per parameter in the order given (views: do not write them)."""
        return [fr.outer[fr.offsets[i]:fr.offsets[i + 1]].reshape(p.shape) for fr in self.fragments
                for i, p in enumerate(fr.params)]

    def _shared_tensors(self):
        out = [(f"diloco.outer.{fr.index}", fr.outer) for fr in self.fragments]
        for fr in self.fragments:
            out += [(f"diloco.opt.{fr.index}.{k}", v) for k, v in sorted(fr.state.items())]
        out.append(("diloco.step", self._step))
        return out

    def _pseudo_gradient(self, fr):
        for i, p in enumerate(fr.params):
            np.subtract(fr.outer[fr.offsets[i]:fr.offsets[i + 1]], p.reshape(-1),
                        out=fr.pg[fr.offsets[i]:fr.offsets[i + 1]])

    def _inner_from_outer(self, fr, alpha):
        for i, p in enumerate(fr.params):
            o = fr.outer[fr.offsets[i]:fr.offsets[i + 1]].reshape(p.shape)
            if alpha:
                p *= np.float32(alpha)
                p += np.float32(1.0 - alpha) * o
            else:
                p[...] = o

    def _outer_step(self, fr):
        self.outer_optimizer.step(fr.outer, fr.pg, fr.state)

    def _make_wire(self, n, kind):
        return np.zeros(n, np.float16)

    def _cast_to_wire(self, fr):
        fr.wire[...] = fr.pg

    def _wire_as_float(self, fr):
        return fr.wire.astype(np.float32)

"""Test helper: score raw feature vectors with the C tree of a trained model folder, through
ctypes (the production extension holds only what production code calls).

``policy.so`` exports ``gc_tree``, a ``gc_tree_model`` (govcore/policy.h); :class:`CTree` reads
it and calls its m2cgen ``score`` function on float32-rounded inputs, then takes the first
class of highest probability, as ``gc_propose_tree`` does.
"""
from __future__ import annotations

import ctypes
import struct
from pathlib import Path

_SCORE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double))


class _TreeModel(ctypes.Structure):
    """struct gc_tree_model (govcore/policy.h), field for field."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("score", _SCORE),
        ("n_features", ctypes.c_int),
        ("feature_names", ctypes.POINTER(ctypes.c_char_p)),
        ("n_classes", ctypes.c_int),
        ("classes_mhz", ctypes.POINTER(ctypes.c_double)),
        ("default_util_pct", ctypes.c_double * 2),
        ("ffg_mhz", ctypes.c_double),
    ]


def _f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", float(x)))[0]


class CTree:
    def __init__(self, model_dir: str | Path):
        self._lib = ctypes.CDLL(str(Path(model_dir) / "policy.so"))
        self.m = _TreeModel.in_dll(self._lib, "gc_tree")
        self.feature_names = tuple(self.m.feature_names[i].decode() for i in range(self.m.n_features))
        self.classes_mhz = tuple(self.m.classes_mhz[i] for i in range(self.m.n_classes))

    def predict_features(self, rows) -> list[float]:
        """Class (MHz) for each raw feature vector."""
        nf, nc = self.m.n_features, self.m.n_classes
        x = (ctypes.c_double * nf)()
        p = (ctypes.c_double * nc)()
        out = []
        for row in rows:
            if len(row) != nf:
                raise ValueError(f"expected {nf} features, got {len(row)}")
            for j in range(nf):
                x[j] = _f32(row[j])
            self.m.score(x, p)
            best = max(range(nc), key=lambda i: (p[i], -i))  # the first of the highest
            out.append(self.classes_mhz[best])
        return out

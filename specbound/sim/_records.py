"""The compiled loop's records as Numba structure references.

The block functions of :mod:`specbound.sim._compiled` pass five records to one another (the
run's constants, the two models, a prompt's output rows and work arrays, the prompt).  As
named tuples every call would hand over every member of every record (the work record alone
holds 42 arrays): Numba then types, lowers and reference-counts hundreds of values per
call, and compiling the loop took minutes.  A structure reference is one pointer to a
heap-allocated record, so a call passes five pointers and a function touches only the
fields it reads; the block functions read the fields by name either way, so their code is
the same (cf. Numba's ``numba.experimental.structref``; the records hold the same arrays,
so the decoded tokens are bit for bit those of the named tuples).

The named tuples of :mod:`specbound.sim._compiled` (``Run``, ``Model``, ``Out``) stay the
Python-side form of the records (built, replaced and inspected from Python); ``decode_one``
turns them into these references once per prompt.  Every class lives at module level so
that Numba's on-disk cache can pickle the types by name.  With the JIT off
(``NUMBA_DISABLE_JIT=1``, the no-JIT test tier runs the kernels' Python source) structure
references cannot be built, and the records are named tuples again (the block functions
only read their fields).
"""

from __future__ import annotations

from collections import namedtuple

from numba.core import config, types
from numba.experimental import structref

#: the fields of each record, in the order of the named tuples of ``_compiled``
RUN_FIELDS = (
    "kind", "keyed", "kcoin", "reweighted", "gamma", "mask", "fresh", "kres", "skipmode",
    "track_skip", "N", "L", "B", "max_blocks", "window", "kdw", "adw", "person",
    "store_drafts", "share", "vstep", "fpar", "ipar", "jud", "alw")
MODEL_FIELDS = ("kind", "ints", "uints", "floats", "base", "matrix", "initial", "rows")
OUT_FIELDS = ("emitted", "accepted", "nu", "dec_ok", "dec_pos", "pivots", "drafts",
              "block_ell", "counts", "skipped", "decision_skipped")
PROMPT_FIELDS = ("tokens", "state", "n0", "run_label")
WORK_FIELDS = (
    "P", "LG", "Q", "QN", "QS", "SN", "GU", "GP", "GQ", "W", "T", "NU",
    "parent", "ntok", "depth", "mult", "nfirst", "nlab", "labset", "nskip", "nskset", "nslot",
    "ncands", "has_s", "paths", "dnode", "buf", "seen", "active", "cands", "u_acc",
    "leaf_rows", "order", "sks", "labs", "us", "ulabels", "scr", "pre", "pst", "apre",
    "apst")


if config.DISABLE_JIT:
    RunRef = namedtuple("RunRef", RUN_FIELDS)
    ModelRef = namedtuple("ModelRef", MODEL_FIELDS)
    OutRef = namedtuple("OutRef", OUT_FIELDS)
    PromptRef = namedtuple("PromptRef", PROMPT_FIELDS)
    WorkRef = namedtuple("WorkRef", WORK_FIELDS)
else:
    def _plain(fields):
        """Field types without literal values (a run's flags are values, not constants)."""
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


    @structref.register
    class RunType(types.StructRef):
        def preprocess_fields(self, fields):
            return _plain(fields)


    @structref.register
    class ModelType(types.StructRef):
        def preprocess_fields(self, fields):
            return _plain(fields)


    @structref.register
    class OutType(types.StructRef):
        def preprocess_fields(self, fields):
            return _plain(fields)


    @structref.register
    class PromptType(types.StructRef):
        def preprocess_fields(self, fields):
            return _plain(fields)


    @structref.register
    class WorkType(types.StructRef):
        def preprocess_fields(self, fields):
            return _plain(fields)


    class RunRef(structref.StructRefProxy):
        """The run's constants (``_compiled.Run``) by reference."""


    class ModelRef(structref.StructRefProxy):
        """A compiled model (``_compiled.Model``) by reference."""


    class OutRef(structref.StructRefProxy):
        """A prompt's output rows (``_compiled.Out``) by reference."""


    class PromptRef(structref.StructRefProxy):
        """One prompt: tokens, PCG64 state, prompt length, run label."""


    class WorkRef(structref.StructRefProxy):
        """The work arrays of one prompt (``_compiled._work``)."""


    structref.define_proxy(RunRef, RunType, list(RUN_FIELDS))
    structref.define_proxy(ModelRef, ModelType, list(MODEL_FIELDS))
    structref.define_proxy(OutRef, OutType, list(OUT_FIELDS))
    structref.define_proxy(PromptRef, PromptType, list(PROMPT_FIELDS))
    structref.define_proxy(WorkRef, WorkType, list(WORK_FIELDS))

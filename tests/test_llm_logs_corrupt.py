"""The distribution-log reader on corrupted copies of the shipped log (specbound.llm.logs).

Every file of the shipped log -- the manifest, each kind of ``contexts.jsonl`` line,
``SHA256SUMS``, every sub-log's ``meta.json`` and a sample of its arrays -- is truncated,
garbled, removed, duplicated and reordered (a line of a text file; the whole of a binary
one), and the reader must either read the log exactly as the intact one or raise a
``ValueError`` that names the path: never a silent short read, never another exception.

Two modes.  With ``SHA256SUMS`` (the shipped log as it is; ``shipped_log()`` and
``read_log``) every change to a listed file is caught by its checksum.  Without it (a log
whose ``SHA256SUMS`` was removed, or an older one) the structural checks alone must
catch every corruption of the text files and of the arrays' sizes and headers; a changed
value inside an array, or a changed prompt label of the manifest (free text stored only
there), cannot be seen without checksums, so those are left to the first mode.  A small
synthetic log with target-only lines (the second kind of ``contexts.jsonl`` line, written by
``generate(..., log=...)``) gets the same treatment.  No torch; about 6 s of CPU.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from specbound.llm import logs
from specbound.llm.logs import (
    CONTEXTS,
    MANIFEST,
    SUMS,
    DistributionLog,
    read_log,
    shipped_log,
    shipped_log_path,
)
from specbound.sim.logged import LogReader

V = 30

# ----------------------------------------------------------------------------- helpers


def _hash_files(folder: Path) -> str:
    lines = ["# checksums of the test's synthetic log"]
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.name != SUMS:
            lines.append(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  "
                         f"{f.relative_to(folder).as_posix()}")
    return "\n".join(lines) + "\n"


def _synthetic(path: Path) -> Path:
    """A small log with both kinds of contexts.jsonl line (with and without target-only
    positions), closed, with a SHA256SUMS as scripts/make_log.py writes it."""
    rng = np.random.default_rng(11)

    def dist():
        p = rng.dirichlet(np.full(V, 0.5))
        p[np.argsort(p)[:V - 8]] = 0.0
        return p / p.sum()

    with DistributionLog(path, vocab_size=V, drafts=["a", "b"], target_model="toy",
                         processing={"temperature": 1.0, "top_k": 8, "top_p": None},
                         decoder="vsps", prompts=["x", "y", "z", "w"]) as log:
        for pid in range(4):
            ctx = [int(t) for t in rng.integers(0, V, size=3)]
            for s in range(3):
                log.record(pid, ctx, dist(), [dist(), dist()])
                ctx.append(int(rng.integers(0, V)))
                if pid % 2 == 0 and s == 1:  # a bonus position: no draft distribution
                    log.record(pid, ctx, dist(), [])
                    ctx.append(int(rng.integers(0, V)))
    (path / SUMS).write_text(_hash_files(path), encoding="utf-8")
    return path


def _summary(log, with_prompts: bool) -> tuple:
    """Everything a read gives: sizes, prompt ids, contexts, metadata and every array."""
    h = hashlib.sha256()
    subs = [log[d] for d in log.drafts] + ([log.target_only] if log.target_only else [])
    for r in subs:
        h.update(json.dumps(r.meta, sort_keys=True).encode())
        for k, v in sorted(r.arrays().items()):
            h.update(k.encode() + np.ascontiguousarray(v).tobytes())
    for which in ("pairs", "target_only"):
        for c in log.contexts(which):
            h.update(c.tobytes() + b"|")
    meta = dict(log.meta) if with_prompts else {k: v for k, v in log.meta.items()
                                                  if k != "prompts"}
    return len(log), log.prompt_ids, log.drafts, json.dumps(meta, sort_keys=True), h.hexdigest()


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _text_ops(data: bytes, picks) -> dict[str, bytes | None]:
    """Corruptions of a text file, line by line (line indices ``picks``)."""
    lines = _lines(data)
    out: dict[str, bytes | None] = {"removed": None, "empty": b""}
    for k in sorted({k % len(lines) for k in picks}):
        start = sum(len(x) for x in lines[:k])
        line = lines[k]
        out[f"line{k}-truncated-in-the-middle"] = data[: start + len(line) // 2]
        if k:
            out[f"cut-before-line{k}"] = data[:start]
        for where, at in (("first", start), ("middle", start + len(line.rstrip()) // 2)):
            out[f"line{k}-garbled-{where}"] = data[:at] + b"\x00" + data[at + 1:]
        out[f"line{k}-removed"] = b"".join(lines[:k] + lines[k + 1:])
        out[f"line{k}-duplicated"] = b"".join(lines[: k + 1] + lines[k:])
        if k + 1 < len(lines):
            out[f"lines{k}-{k + 1}-swapped"] = b"".join(
                lines[:k] + [lines[k + 1], lines[k]] + lines[k + 2:])
        else:
            out[f"line{k}-without-its-line-break"] = data.rstrip(b"\n")
    return out


def _binary_ops(data: bytes, values: bool) -> dict[str, bytes | None]:
    """Corruptions of an array file; ``values``: also those that change only values."""
    out: dict[str, bytes | None] = {
        "removed": None, "empty": b"", "truncated-in-the-header": data[:64],
        "truncated-by-one-byte": data[:-1], "header-garbled": b"\x00" + data[1:],
        "duplicated": data + data[128:]}
    if values and len(data) >= 136:
        out["last-byte-garbled"] = data[:-1] + bytes([data[-1] ^ 0xFF])
        out["two-entries-swapped"] = data[:128] + data[132:136] + data[128:132] + data[136:]
    return out


#: (log, with SHA256SUMS) -> file -> line picks (text) or None (array): with checksums a
#: sample suffices (any change to a listed file fails its hash) besides SHA256SUMS itself;
#: without, the structural checks meet every line of the manifest's kinds of field
_PLAN = {
    ("shipped", True): {MANIFEST: (1, -1), CONTEXTS: (0, 5, -1), "{0}/meta.json": (2, -1),
                        SUMS: (0, 1, 20, -1), "{0}/q_idx.npy": None,
                        "{-1}/p_offsets.npy": None},
    ("shipped", False): {MANIFEST: (1, 3, 5, 12, 25, -2, -1), CONTEXTS: (0, 3, 7, -1),
                         "{0}/meta.json": (1, 3, 5, 8, -2), "{-1}/meta.json": (6, 14),
                         "{0}/p_idx.npy": None, "{0}/p_offsets.npy": None,
                         "{-1}/q_val.npy": None, "{1}/prompt_id.npy": None},
    ("synthetic", True): {CONTEXTS: (0, 1, 2, 3), "{-1}/meta.json": (2, -1), SUMS: (0, -1),
                          "{-1}/prompt_id.npy": None},
    ("synthetic", False): {MANIFEST: (1, -3, -2, -1), CONTEXTS: (0, 1, 2, 3),
                           "{-1}/meta.json": (1, 5, -2), "{-1}/p_idx.npy": None,
                           "{-1}/step.npy": None},
}


def _cases(root: Path, key: tuple[str, bool]) -> list[tuple[str, str, bytes | None]]:
    """(file, corruption, new bytes or None) of one plan; ``{i}`` is the i-th sub-log (in
    name order: the target-only one is last when there is one)."""
    subs = sorted(p.parent.name for p in root.glob("*/meta.json"))
    cases = []
    for pattern, picks in _PLAN[key].items():
        name = pattern.replace("{0}", subs[0]).replace("{1}", subs[1]).replace("{-1}",
                                                                              subs[-1])
        data = (root / name).read_bytes()
        ops = (_binary_ops(data, values=key[1]) if picks is None else _text_ops(data, picks))
        cases += [(name, op, new) for op, new in ops.items()]
    return cases


def _corrupt(pristine: Path, dest: Path, name: str, new: bytes | None) -> Path:
    """A copy of ``pristine`` (hard links: cheap) with file ``name`` replaced by ``new``
    (removed when None); the replaced file is unlinked first, so the pristine copy is never
    written through a link."""
    shutil.copytree(pristine, dest, copy_function=os.link)
    f = dest / name
    f.unlink()
    if new is not None:
        f.write_bytes(new)
    return dest


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("pristine")
    shipped = base / "shipped"
    shutil.copytree(shipped_log_path(), shipped)
    bare = base / "shipped-without-sums"
    shutil.copytree(shipped, bare)
    (bare / SUMS).unlink()
    synth = _synthetic(base / "synthetic")
    synth_bare = base / "synthetic-without-sums"
    shutil.copytree(synth, synth_bare)
    (synth_bare / SUMS).unlink()
    return {"shipped": shipped, "shipped-without-sums": bare, "synthetic": synth,
            "synthetic-without-sums": synth_bare}


@pytest.fixture(scope="module")
def references(pristine) -> dict[str, tuple]:
    out = {}
    for key, path in pristine.items():
        out[key] = _summary(read_log(path), with_prompts=True)
        out[key + ":no-prompts"] = _summary(read_log(path), with_prompts=False)
    return out


def _params():
    """Every (log, file, corruption): listed at collection from the package's shipped log
    and a synthetic log written once into a scratch folder."""
    import tempfile

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        synth = _synthetic(Path(tmp) / "synthetic")
        for (key, with_sums) in _PLAN:
            root = shipped_log_path() if key == "shipped" else synth
            k = key if with_sums else f"{key}-without-sums"
            for name, op, _ in _cases(root, (key, with_sums)):
                out.append(pytest.param(k, name, op, id=f"{k}:{name}:{op}"))
    return out


def _case_bytes(root: Path, log: str, name: str, op: str) -> bytes | None:
    key = (log.removesuffix("-without-sums"), not log.endswith("-without-sums"))
    for n, o, new in _cases(root, key):
        if (n, o) == (name, op):
            return new
    raise AssertionError((name, op))  # pragma: no cover


# ----------------------------------------------------------------------------- the table


@pytest.mark.parametrize(("log", "name", "op"), _params())
def test_a_corrupted_log_reads_exactly_or_raises_a_value_error(pristine, references,
                                                               tmp_path, monkeypatch,
                                                               log, name, op):
    with_sums = not log.endswith("-without-sums")
    new = _case_bytes(pristine[log], log, name, op)
    path = _corrupt(pristine[log], tmp_path / "log", name, new)
    readers = [lambda: read_log(path)]
    if not with_sums and not name.endswith(".npy"):
        readers.append(lambda: read_log(path, validate=False))  # structure: checked anyway
    if log == "shipped":
        monkeypatch.setattr(logs, "shipped_log_path", lambda: path)
        readers.append(shipped_log)
    want = references[log if with_sums else f"{log}:no-prompts"]
    for read in readers:
        try:
            got = _summary(read(), with_prompts=with_sums)
        except ValueError as exc:
            assert str(exc).startswith("path"), exc  # names the argument
            continue
        assert got == want, f"{name} {op}: a silent wrong read"


def test_every_file_of_the_shipped_log_is_covered():
    """The table corrupts every kind of file of the shipped log: the manifest, the lines of
    contexts.jsonl, SHA256SUMS, and every sub-log's meta.json and (a sample of) arrays."""
    root = shipped_log_path()
    kinds = {f.name if f.suffix != ".npy" else "array" for f in root.rglob("*") if f.is_file()}
    covered = {Path(n).name if not n.endswith(".npy") else "array"
               for key in _PLAN if key[0] == "shipped" for n, _, _ in _cases(root, key)}
    assert kinds == covered == {MANIFEST, CONTEXTS, SUMS, "meta.json", "array"}


# ----------------------------------------------------------------------------- regressions


@pytest.fixture()
def shipped_copy(tmp_path) -> Path:
    dest = tmp_path / "log"
    shutil.copytree(shipped_log_path(), dest)
    return dest


def test_a_garbage_line_is_an_error_not_the_end_of_the_log(shipped_copy):
    """A garbage line after line 3 read as a log of the first 3 prompts (144 of 569
    positions), with validate=True and no error."""
    f = shipped_copy / CONTEXTS
    lines = _lines(f.read_bytes())
    f.write_bytes(b"".join(lines[:3] + [b"garbage\n"] + lines[3:]))
    (shipped_copy / SUMS).unlink()  # a user's log: no checksums to fall back on
    for validate in (True, False):
        with pytest.raises(ValueError, match=r"contexts\.jsonl, line 4: not a JSON line"):
            read_log(shipped_copy, validate=validate)
    f.write_bytes(b"".join(lines[:3] + [b"\n"] + lines[3:]))  # an empty line
    with pytest.raises(ValueError, match=r"line 4"):
        read_log(shipped_copy)


def test_a_missing_contexts_file_is_an_error_not_an_empty_log(shipped_copy):
    (shipped_copy / CONTEXTS).unlink()
    with pytest.raises(ValueError, match=r"SHA256SUMS lists 'contexts\.jsonl', which is "
                                         "missing"):
        read_log(shipped_copy)
    (shipped_copy / SUMS).unlink()
    with pytest.raises(ValueError, match=r"has no contexts\.jsonl"):
        read_log(shipped_copy)


def test_shipped_log_checks_its_sha256sums(shipped_copy, monkeypatch):
    """Two swapped q_idx entries (tokens with the wrong values: a wrong TV) passed."""
    monkeypatch.setattr(logs, "shipped_log_path", lambda: shipped_copy)
    assert len(shipped_log()) == 569
    f = shipped_copy / "draft2-early_exit_28" / "q_idx.npy"
    data = bytearray(f.read_bytes())
    data[128:132], data[132:136] = data[132:136], data[128:132]
    f.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"path: draft2-early_exit_28/q_idx\.npy .* does not "
                                         "match its SHA-256"):
        shipped_log()
    with pytest.raises(ValueError, match="SHA-256"):
        read_log(shipped_copy)
    assert len(read_log(shipped_copy, checksums=False)) == 569  # what was read before
    (shipped_copy / SUMS).unlink()
    with pytest.raises(ValueError, match="has no SHA256SUMS"):
        shipped_log()
    with pytest.raises(ValueError, match="checksums"):
        read_log(shipped_copy, checksums="yes")


def _manifest(path: Path, edit) -> None:
    mf = path / MANIFEST
    doc = json.loads(mf.read_text())
    mf.write_text(json.dumps(edit(doc)))


@pytest.mark.parametrize(("edit", "match"), [
    (lambda d: [], "is not a specbound.llm.distribution_log manifest"),
    (lambda d: {}, "is not a specbound.llm.distribution_log manifest"),
    (lambda d: {k: v for k, v in d.items() if k != "subdirs"}, "lacks the field 'subdirs'"),
    (lambda d: {k: v for k, v in d.items() if k != "meta"}, "lacks the field 'meta'"),
    (lambda d: {**d, "meta": []}, "'meta' must be an object"),
    (lambda d: {**d, "meta": {k: v for k, v in d["meta"].items() if k != "drafts"}},
     "lacks the field 'meta.drafts'"),
    (lambda d: {**d, "meta": {k: v for k, v in d["meta"].items() if k != "vocab_size"}},
     "lacks the field 'meta.vocab_size'"),
    (lambda d: {**d, "meta": {**d["meta"], "vocab_size": "49152"}}, "'meta.vocab_size'"),
    (lambda d: {**d, "meta": {**d["meta"], "vocab_size": True}}, "'meta.vocab_size'"),
    (lambda d: {**d, "meta": {**d["meta"], "drafts": d["meta"]["drafts"][:3]}},
     "'subdirs' names 4 sub-logs for 3 drafts"),
    (lambda d: {**d, "subdirs": d["subdirs"][:3]}, "'subdirs' names 3 sub-logs for 4 drafts"),
    (lambda d: {**d, "subdirs": "draft0"}, "'subdirs' must be a list"),
    (lambda d: {**d, "subdirs": ["../../x"] + d["subdirs"][1:]}, r"'subdirs'\[0\]"),
    (lambda d: {**d, "meta": {**d["meta"], "drafts": [1, 2, 3, 4]}}, "'meta.drafts'"),
    (lambda d: {**d, "meta": {**d["meta"], "prompts": ["a"]}}, "'meta.prompts'"),
    (lambda d: {**d, "meta": {**d["meta"], "processing": None}}, "'meta.processing'"),
    (lambda d: {**d, "target_only": "../x"}, "'target_only'"),
    (lambda d: {**d, "meta": {**d["meta"], "vocab_size": 1000}},
     "'sequences' holds .* not a token id in \\[0, 999\\]"),
])
def test_manifest_schema_errors_name_the_field(shipped_copy, edit, match):
    """[] gave TypeError, {} KeyError, a missing subdirs/meta KeyError, fewer drafts than
    sub-logs a bare zip() message, a smaller vocabulary than the token ids was accepted."""
    (shipped_copy / SUMS).unlink()
    _manifest(shipped_copy, edit)
    with pytest.raises(ValueError, match=f"^path: .*{match}"):
        read_log(shipped_copy)


def _edit_line(path: Path, k: int, edit) -> None:
    f = path / CONTEXTS
    lines = f.read_text().splitlines()
    lines[k] = json.dumps(edit(json.loads(lines[k])))
    f.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("edit", "match"), [
    (lambda r: [], "line 2: must be a JSON object"),
    (lambda r: {}, "line 2: lacks the field 'prompt_id'"),
    (lambda r: {k: v for k, v in r.items() if k != "sequences"},
     "line 2: lacks the field 'sequences'"),
    (lambda r: {**r, "positions": "48"}, "line 2: 'positions' must be an integer"),
    (lambda r: {**r, "positions": 48.0}, "line 2: 'positions' must be an integer"),
    (lambda r: {**r, "prompt_id": -1}, "line 2: 'prompt_id' must be an integer >= 0"),
    (lambda r: {**r, "prompt_id": 0}, "line 2: 'prompt_id' 0 is already committed on line 1"),
    (lambda r: {**r, "sequences": [r["sequences"][0][:-1] + [49152]]},
     r"line 2: 'sequences' holds 49152, not a token id in \[0, 49151\]"),
    (lambda r: {**r, "sequences": [r["sequences"][0][:-1] + [-1]]}, "'sequences' holds -1"),
    (lambda r: {**r, "sequences": [r["sequences"][0][:-1] + [True]]},
     "'sequences' holds True"),
    (lambda r: {**r, "contexts": r["contexts"][:-1]},
     r"line 2: 'contexts' must list one \[sequence, length\] pair per position \(48\)"),
    (lambda r: {**r, "contexts": r["contexts"][:-1] + [[1, 5]]}, "'contexts' holds \\[1, 5\\]"),
    (lambda r: {**r, "contexts": r["contexts"][:-1] + [[0, 10**6]]}, "'contexts' holds"),
    (lambda r: {**r, "target_positions": 1}, "'target_positions' and 'target_contexts' go"),
    (lambda r: {**r, "target_positions": 1, "target_contexts": [[0, 1]]},
     "has target-only positions but manifest.json names no 'target_only'"),
    (lambda r: {**r, "positions": 47, "contexts": r["contexts"][:-1]},
     "draft0-temperature_0.5 is complete with 569 positions, but contexts.jsonl commits 568"),
])
def test_context_line_schema_errors_name_the_line_and_field(shipped_copy, edit, match):
    (shipped_copy / SUMS).unlink()
    _edit_line(shipped_copy, 1, edit)
    with pytest.raises(ValueError, match=f"^path: .*{match}"):
        read_log(shipped_copy)


def test_a_sub_log_of_another_log_is_refused(shipped_copy):
    (shipped_copy / SUMS).unlink()
    a, b = shipped_copy / "draft0-temperature_0.5", shipped_copy / "draft1-temperature_1.5"
    meta_a, meta_b = (a / "meta.json").read_bytes(), (b / "meta.json").read_bytes()
    (a / "meta.json").write_bytes(meta_b)
    (b / "meta.json").write_bytes(meta_a)
    with pytest.raises(ValueError, match="draft0-temperature_0.5/meta.json disagrees with "
                                         "manifest.json on 'draft_model'"):
        read_log(shipped_copy)


def test_a_torn_last_line_is_skipped_only_in_an_interrupted_log(tmp_path, shipped_copy):
    """The writer appends a prompt's line after its sub-logs commit: in a log whose writer
    was not closed a torn last line is a prompt never committed (left out, as resuming
    does); in a closed log it is a lost prompt (an error)."""
    (shipped_copy / SUMS).unlink()
    f = shipped_copy / CONTEXTS
    data = f.read_bytes()
    f.write_bytes(data[:-100])
    with pytest.raises(ValueError, match="the last line is cut off"):
        read_log(shipped_copy)
    path = tmp_path / "open"
    log = DistributionLog(path, vocab_size=V, drafts=["a"], target_model="t",
                          processing={}, prompts=["x", "y"])
    p = np.full(V, 1.0 / V)
    log.record(0, [1, 2], p, [p])
    log.flush()
    log.record(1, [3], p, [p])
    log.flush()  # not closed: the sub-log is incomplete
    g = path / CONTEXTS
    g.write_bytes(g.read_bytes()[:-7])
    r = read_log(path)
    assert r.prompt_ids == [0] and len(r) == 1
    log2 = DistributionLog(path, vocab_size=V, drafts=["a"], target_model="t",
                           processing={}, prompts=["x", "y"], resume=True)
    assert log2.prompt_ids == {0} and g.read_bytes().endswith(b"}\n")
    log2.close()


def test_resume_refuses_a_corrupt_line_and_a_lost_line(tmp_path):
    """Resuming cut contexts.jsonl at its first bad line (losing every later prompt) and
    rolled the sub-logs back to the lines left, whatever was lost."""
    path = tmp_path / "log"
    kw = dict(vocab_size=V, drafts=["a"], target_model="t", processing={},
              prompts=["x", "y", "z"])
    p = np.full(V, 1.0 / V)
    with DistributionLog(path, **kw) as log:
        for pid in range(3):
            log.record(pid, [pid + 1], p, [p])
    f = path / CONTEXTS
    lines = _lines(f.read_bytes())
    f.write_bytes(lines[0] + b"{garbage\n" + lines[2])
    with pytest.raises(ValueError, match="contexts.jsonl in .* does not match its SHA-256"):
        DistributionLog(path, **kw, resume=True)  # a closed log's checksums catch any edit
    (path / SUMS).unlink()  # a log without them (older, or cut by a crash after resuming)
    with pytest.raises(ValueError, match="line 2: not a JSON line"):
        DistributionLog(path, **kw, resume=True)
    assert _lines(f.read_bytes())[2] == lines[2]  # nothing cut
    f.write_bytes(lines[0] + lines[2])  # line 2 lost: not a single interrupted prompt
    with pytest.raises(ValueError, match="more than one interrupted prompt"):
        DistributionLog(path, **kw, resume=True)
    assert len(LogReader(path / "draft0-a")) == 3  # nothing rolled back
    (path / SUMS).write_text("")
    with pytest.raises(ValueError, match="published"):
        DistributionLog(path, **kw, resume=True)


def test_a_closed_log_carries_checksums_that_catch_an_edited_token_id(tmp_path):
    """DistributionLog writes SHA256SUMS when it closes; reading checks it by default, so a
    token id swapped for another valid one (no structural check can see it) is an error;
    resuming checks it too, and writes it again at the next close."""
    from specbound._io import WRITER_MARK

    path = tmp_path / "log"
    kw = dict(vocab_size=V, drafts=["a"], target_model="t", processing={},
              prompts=["x", "y"])
    p = np.linspace(1.0, 2.0, V)
    p /= p.sum()
    with DistributionLog(path, **kw) as log:
        log.record(0, [1, 2], p, [p[::-1].copy()])
    assert (path / SUMS).read_text().splitlines()[0] == WRITER_MARK
    assert len(read_log(path, checksums=True)) == 1
    with DistributionLog(path, **kw, resume=True) as log:
        assert not (path / SUMS).exists()
        log.record(1, [3], p, [p])
    assert len(read_log(path, checksums=True)) == 2
    f = path / "draft0-a" / "p_idx.npy"
    a = np.load(f)
    a[[0, 1]] = a[[1, 0]]
    np.save(f, a)
    with pytest.raises(ValueError, match=r"draft0-a/p_idx\.npy in .* does not match its "
                                         "SHA-256"):
        read_log(path)
    with pytest.raises(ValueError, match="does not match its SHA-256"):
        DistributionLog(path, **kw, resume=True)
    assert read_log(path, checksums=False).prompt_ids == [0, 1]  # what the edit hides

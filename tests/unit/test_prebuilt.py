"""The one list of programs the tool compiles while it runs covers every shipped shim source, and
builds each into a given cache (what a kit does for a target with no compiler)."""

from __future__ import annotations

from pathlib import Path

from servers import prebuilt

REPO = Path(__file__).resolve().parents[2]


def test_every_shipped_shim_source_is_in_the_list():
    shipped = {p.name for p in (REPO / "servers" / "shims").glob("*.c")}
    listed = {Path(s).name for s in prebuilt.SOURCES}
    assert shipped <= listed
    assert len(prebuilt.SOURCES) == len(prebuilt.RUNTIME_BUILDS)


def test_build_all_puts_every_program_into_the_given_cache(tmp_path):
    built = prebuilt.build_all(tmp_path)
    assert len(built) == len(prebuilt.RUNTIME_BUILDS)
    for path, source in zip(built, prebuilt.SOURCES, strict=True):
        assert path.parent == tmp_path and path.name.startswith(Path(source).stem + "-")
        assert path.read_bytes()[:4] == b"\x7fELF"
    # a second call finds them built (same names: the source's hash), compiles nothing new
    assert prebuilt.build_all(tmp_path) == built
    assert sorted(tmp_path.iterdir()) == sorted(built)

"""Host metadata readers."""

from __future__ import annotations

from pathlib import Path

from collectors.host import cell_host_state, host_metadata, thp_state
from collectors.thp_sysfs import parse_choice as bracketed

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "procfs"


def test_bracketed_choice():
    assert bracketed("always [madvise] never") == "madvise"
    assert bracketed("always defer defer+madvise [madvise] never") == "madvise"
    assert bracketed(None) is None


def test_thp_state_keeps_the_full_line(tmp_path):
    (tmp_path / "enabled").write_text("[always] madvise never\n")
    (tmp_path / "defrag").write_text("always defer [defer+madvise] madvise never\n")
    s = thp_state(tmp_path)
    assert s["enabled"] == "always" and s["defrag"] == "defer+madvise"
    assert s["enabled_line"] == "[always] madvise never"


def test_thp_state_tolerates_missing_sysfs(tmp_path):
    assert thp_state(tmp_path / "nope")["enabled"] is None


def test_host_metadata_has_the_manifest_fields():
    h = host_metadata()
    for key in ("kernel", "cpu_model", "cpu_count", "memory_kb", "glibc_version", "thp",
                "hostname", "python", "boot_id"):  # fmt: skip
        assert key in h
    assert h["cpu_count"] >= 1 and h["memory_kb"] > 0
    assert h["glibc_version"] and h["glibc_version"][0].isdigit()


def test_cell_host_state_reads_loadavg_from_the_given_root():
    s = cell_host_state(str(FIXTURE))
    assert s["loadavg"] == [0.52, 0.31, 0.20]
    assert "enabled" in s["thp"]
